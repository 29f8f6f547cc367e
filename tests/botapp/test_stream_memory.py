"""The streaming process's heap (botapp/stream/memory.py): what the parts took is given back by
malloc_trim after streams end, where fixing glibc's mmap threshold would cost every part."""

import asyncio
import platform
import subprocess
import sys

import pytest

from botapp.stream.memory import HeapTrimmer, heap_give_back

GLIBC = platform.libc_ver()[0] == "glibc"

# Parts arrive and are handed on as a stream's are, small objects made meanwhile and kept; then
# the streams end. Prints the MiB the process gave back, and the CPU a part's buffers cost.
PROBE = """
import ctypes, ctypes.util, os, sys, time
from botapp.stream.memory import heap_give_back

def rss():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024

if sys.argv[1] == "threshold":
    ctypes.CDLL(ctypes.util.find_library("c")).mallopt(-3, 128 * 1024)  # M_MMAP_THRESHOLD fixed
MIB = 1024 * 1024
source = os.urandom(MIB)
small, held = [], []
began = time.process_time()
for _ in range(400):
    received = bytearray()
    for at in range(0, MIB, 65536):
        received += source[at : at + 65536]
    held.append(bytes(received)[1:])  # the packet, then its part
    del received
    small.append([object() for _ in range(200)])
    if len(held) > 8:
        held.pop(0)
cpu = (time.process_time() - began) / 400
peak = rss()
held = []
if sys.argv[1] == "trim":
    heap_give_back()
print(peak - rss(), cpu)
"""


def probe(mode: str) -> tuple[int, float]:
    done = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    freed, cpu = done.stdout.split()
    return int(freed), float(cpu)


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc")
def test_the_heap_keeps_the_parts_memory_until_trimmed_and_trimming_costs_the_parts_nothing():
    kept, cpu_heap = probe("default")
    trimmed, _ = probe("trim")
    mapped, cpu_mapped = probe("threshold")
    assert kept < 2  # glibc's heap keeps the 8 MiB the last parts took
    assert trimmed >= 6  # malloc_trim gives them back
    assert mapped >= 6  # as a fixed threshold would...
    assert cpu_mapped > 1.5 * cpu_heap  # ...at a cost on every part


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc")
def test_the_trimmer_trims_only_after_streams_ended():
    async def run():
        trimmer = HeapTrimmer(every=3600)
        first = await trimmer.trim_if_ended()
        trimmer.ended += 2
        second = await trimmer.trim_if_ended()
        third = await trimmer.trim_if_ended()
        return first, second, third

    assert asyncio.run(run()) == (False, True, False)
    assert heap_give_back() is True
