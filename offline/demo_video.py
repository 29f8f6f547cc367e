"""The sandbox's demo video (offline/assets/demo.webm): a few seconds of VP8 that any Chromium,
Firefox or VLC plays, seekable over HTTP ranges (its WebM carries its duration and a cue per
second), made without ffmpeg: Chromium encodes the frames (WebCodecs' VideoEncoder, driven by
Playwright against Debian's chromium) and `webm_mux` writes the container.

    .venv/bin/python -m offline.demo_video offline/assets/demo.webm

The file is committed; this makes it again (the bytes differ from run to run: the encoder's)."""

from __future__ import annotations

import base64
import struct
import sys
from dataclasses import dataclass
from pathlib import Path

DEMO_VIDEO = Path(__file__).resolve().parent / "assets" / "demo.webm"
WIDTH, HEIGHT, FPS, SECONDS = 480, 270, 25, 12

# Matroska / WebM element ids (matroska.org/technical/elements.html).
EBML, EBML_VERSION, EBML_READ_VERSION, EBML_MAX_ID, EBML_MAX_SIZE = 0x1A45DFA3, 0x4286, 0x42F7, 0x42F2, 0x42F3
DOC_TYPE, DOC_TYPE_VERSION, DOC_TYPE_READ_VERSION = 0x4282, 0x4287, 0x4285
SEGMENT, INFO, TIMECODE_SCALE, DURATION, MUXING_APP, WRITING_APP = 0x18538067, 0x1549A966, 0x2AD7B1, 0x4489, 0x4D80, 0x5741
TRACKS, TRACK_ENTRY, TRACK_NUMBER, TRACK_UID, TRACK_TYPE, CODEC_ID = 0x1654AE6B, 0xAE, 0xD7, 0x73C5, 0x83, 0x86
VIDEO, PIXEL_WIDTH, PIXEL_HEIGHT = 0xE0, 0xB0, 0xBA
CUES, CUE_POINT, CUE_TIME, CUE_TRACK_POSITIONS, CUE_TRACK, CUE_CLUSTER_POSITION = 0x1C53BB6B, 0xBB, 0xB3, 0xB7, 0xF7, 0xF1
CLUSTER, TIMECODE, SIMPLE_BLOCK = 0x1F43B675, 0xE7, 0xA3


@dataclass(frozen=True)
class Frame:
    ms: int  # presentation time, milliseconds
    key: bool
    data: bytes


def _id(element: int) -> bytes:
    return element.to_bytes((element.bit_length() + 7) // 8, "big")


def _size(n: int) -> bytes:
    return bytes([0x01]) + n.to_bytes(7, "big")  # always 8 bytes: sizes known before they are written


def element(element_id: int, payload: bytes) -> bytes:
    return _id(element_id) + _size(len(payload)) + payload


def uint(element_id: int, value: int, width: int = 8) -> bytes:
    return element(element_id, value.to_bytes(width, "big"))


def webm_mux(frames: list[Frame], *, width: int, height: int, duration_ms: int) -> bytes:
    """One VP8 track in WebM: a cluster from each key frame, and a cue naming each cluster, written
    before the clusters (so a player finds them at once, without a seek head)."""
    header = element(
        EBML,
        uint(EBML_VERSION, 1, 1) + uint(EBML_READ_VERSION, 1, 1) + uint(EBML_MAX_ID, 4, 1) + uint(EBML_MAX_SIZE, 8, 1)
        + element(DOC_TYPE, b"webm") + uint(DOC_TYPE_VERSION, 2, 1) + uint(DOC_TYPE_READ_VERSION, 2, 1),
    )  # fmt: skip
    info = element(
        INFO,
        uint(TIMECODE_SCALE, 1_000_000, 4)  # timecodes in milliseconds
        + element(DURATION, struct.pack(">d", float(duration_ms)))
        + element(MUXING_APP, b"courier offline.demo_video")
        + element(WRITING_APP, b"courier offline.demo_video"),
    )
    tracks = element(
        TRACKS,
        element(
            TRACK_ENTRY,
            uint(TRACK_NUMBER, 1, 1) + uint(TRACK_UID, 1, 1) + uint(TRACK_TYPE, 1, 1) + element(CODEC_ID, b"V_VP8")
            + element(VIDEO, uint(PIXEL_WIDTH, width, 2) + uint(PIXEL_HEIGHT, height, 2)),
        ),
    )  # fmt: skip
    groups: list[list[Frame]] = []
    for frame in frames:
        if frame.key or not groups:
            groups.append([])
        groups[-1].append(frame)
    clusters = []
    for group in groups:
        start = group[0].ms
        blocks = b"".join(
            element(SIMPLE_BLOCK, b"\x81" + struct.pack(">h", f.ms - start) + (b"\x80" if f.key else b"\x00") + f.data)
            for f in group
        )
        clusters.append((start, element(CLUSTER, uint(TIMECODE, start) + blocks)))

    def cues(positions: list[int]) -> bytes:
        return element(
            CUES,
            b"".join(
                element(
                    CUE_POINT,
                    uint(CUE_TIME, start) + element(CUE_TRACK_POSITIONS, uint(CUE_TRACK, 1, 1) + uint(CUE_CLUSTER_POSITION, pos)),
                )
                for (start, _), pos in zip(clusters, positions, strict=True)
            ),
        )

    # Positions count from the segment's payload; the cues' own length does not depend on them.
    before = len(info) + len(tracks) + len(cues([0] * len(clusters)))
    positions, at = [], before
    for _, cluster in clusters:
        positions.append(at)
        at += len(cluster)
    segment = element(SEGMENT, info + tracks + cues(positions) + b"".join(c for _, c in clusters))
    return header + segment


def _vint(data: bytes, at: int, *, marker: bool) -> tuple[int, int]:
    """An EBML variable-length integer at `at`: (its value, where the next field starts); an
    element id keeps its length marker (`marker`), a size drops it."""
    first = data[at]
    length = 8 - first.bit_length() + 1
    value = int.from_bytes(data[at : at + length], "big")
    return (value if marker else value & ((1 << (7 * length)) - 1)), at + length


def _children(data: bytes, start: int, end: int):
    """(id, payload start, payload end) of each element in data[start:end]."""
    at = start
    while at < end:
        element_id, at = _vint(data, at, marker=True)
        size, at = _vint(data, at, marker=False)
        yield element_id, at, at + size
        at += size


def webm_frames(data: bytes) -> list[Frame]:
    """The frames of a WebM of one track as webm_mux writes it (its inverse): clusters of simple
    blocks, each timed from its cluster's timecode."""
    frames = []
    for element_id, start, end in _children(data, 0, len(data)):
        if element_id != SEGMENT:
            continue
        for child, c_start, c_end in _children(data, start, end):
            if child != CLUSTER:
                continue
            timecode = 0
            for item, i_start, i_end in _children(data, c_start, c_end):
                if item == TIMECODE:
                    timecode = int.from_bytes(data[i_start:i_end], "big")
                elif item == SIMPLE_BLOCK:  # track (1 byte vint), relative time, flags, frame
                    (relative,) = struct.unpack(">h", data[i_start + 1 : i_start + 3])
                    key = bool(data[i_start + 3] & 0x80)
                    frames.append(Frame(ms=timecode + relative, key=key, data=data[i_start + 4 : i_end]))
    return frames


def demo_video_looped(times: int) -> bytes:
    """The demo video played `times` over in one file (`times` × SECONDS long, `times` × its size):
    a long video of the same bitrate, for a player that must not hold 80 % of it ahead."""
    frames = webm_frames(DEMO_VIDEO.read_bytes())
    period = SECONDS * 1000
    looped = [Frame(ms=f.ms + n * period, key=f.key, data=f.data) for n in range(times) for f in frames]
    return webm_mux(looped, width=WIDTH, height=HEIGHT, duration_ms=times * period)


ENCODE = """
async ([width, height, fps, seconds]) => {
  const frames = [];
  const encoder = new VideoEncoder({
    output: (chunk) => {
      const data = new Uint8Array(chunk.byteLength);
      chunk.copyTo(data);
      let text = "";
      for (const b of data) text += String.fromCharCode(b);
      frames.push({ms: Math.round(chunk.timestamp / 1000), key: chunk.type === "key", data: btoa(text)});
    },
    error: (e) => { throw e; },
  });
  encoder.configure({codec: "vp8", width, height, bitrate: 400_000, framerate: fps});
  const canvas = new OffscreenCanvas(width, height);
  const ctx = canvas.getContext("2d");
  for (let i = 0; i < fps * seconds; i++) {
    const t = i / fps;
    ctx.fillStyle = `hsl(${(t * 30) % 360}, 60%, 35%)`;
    ctx.fillRect(0, 0, width, height);
    ctx.fillStyle = "#fff";
    ctx.fillRect((t / seconds) * (width - 40), height - 50, 40, 30);
    ctx.font = "bold 36px sans-serif";
    ctx.fillText("Courier demo", 24, 70);
    ctx.font = "28px monospace";
    ctx.fillText(`00:${String(Math.floor(t)).padStart(2, "0")}.${String(Math.floor((t % 1) * 10))}`, 24, 120);
    const frame = new VideoFrame(canvas, {timestamp: Math.round(i * 1e6 / fps), duration: Math.round(1e6 / fps)});
    encoder.encode(frame, {keyFrame: i % fps === 0});
    frame.close();
  }
  await encoder.flush();
  return frames;
}
"""


def demo_video_encode(browser) -> bytes:
    """The demo video, encoded by `browser` (a Playwright Chromium) and muxed here."""
    page = browser.new_page()
    try:
        # WebCodecs needs a secure context: a page of https://demo.invalid, answered by Playwright.
        page.route("https://demo.invalid/", lambda route: route.fulfill(body="<!doctype html><title>demo</title>"))
        page.goto("https://demo.invalid/")
        raw = page.evaluate(ENCODE, [WIDTH, HEIGHT, FPS, SECONDS])
    finally:
        page.close()
    frames = [Frame(ms=f["ms"], key=f["key"], data=base64.b64decode(f["data"])) for f in raw]
    return webm_mux(frames, width=WIDTH, height=HEIGHT, duration_ms=SECONDS * 1000)


def main(argv: list[str]) -> int:
    # Playwright is a test dependency: only this script, run by hand, needs it.
    from playwright.sync_api import sync_playwright  # noqa: PLC0415

    out = Path(argv[1]) if len(argv) > 1 else DEMO_VIDEO
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", headless=True, args=["--no-sandbox"])
        try:
            data = demo_video_encode(browser)
        finally:
            browser.close()
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    print(f"{out}: {len(data):,} bytes, {SECONDS} s of {WIDTH}x{HEIGHT} VP8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
