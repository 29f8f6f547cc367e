"""The bytes of the files the in-memory Telegram keeps: those uploaded, as uploaded, and those a
test or the sandbox makes of a given size (`post(..., file_size=...)`), generated.

A generated file costs no memory whatever its size (a 2 GiB video is a few numbers): its bytes are
a function of (file id, offset). Each 4 KiB block is a slice of a pattern drawn once per file
from a generator seeded by its id, at a place that depends on the block's number, with the
block's number written over its first 8 bytes: no two blocks of a file are alike, so a reader that
returns a block from the wrong place, twice or out of order is caught by a checksum.
"""

from __future__ import annotations

import functools
import hashlib
import random

BLOCK = 4096
PATTERN = 64 * 1024 + BLOCK  # bytes drawn per file: the slices start anywhere in the first 64 KiB
_STRIDE = 2_654_435_761  # Knuth's multiplicative hash: spreads consecutive blocks over the pattern


@functools.lru_cache(maxsize=64)
def _pattern(file_id: int) -> bytes:
    return random.Random(file_id).randbytes(PATTERN)  # noqa: S311 - test data, not a secret


def _block(pattern: bytes, number: int) -> bytes:
    start = (number * _STRIDE) % (PATTERN - BLOCK)
    return number.to_bytes(8, "big") + pattern[start + 8 : start + BLOCK]


def generated(file_id: int, offset: int, length: int) -> bytes:
    """Bytes [offset, offset + length) of the generated file `file_id` (any size: not checked)."""
    if length <= 0:
        return b""
    pattern = _pattern(file_id)
    first, last = offset // BLOCK, (offset + length - 1) // BLOCK
    data = b"".join(_block(pattern, n) for n in range(first, last + 1))
    skip = offset - first * BLOCK
    return data[skip : skip + length]


def generated_sha256(file_id: int, size: int, *, step: int = 8 * 1024 * 1024) -> str:
    """The SHA-256 of a whole generated file of `size` bytes (computed in steps of `step`)."""
    digest = hashlib.sha256()
    for offset in range(0, size, step):
        digest.update(generated(file_id, offset, min(step, size - offset)))
    return digest.hexdigest()
