"""Which bytes a request gets, and the headers that say so (botapp/stream/http.py): every case
RFC 9110 names, and a model of it checked against many generated headers."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from botapp.stream.http import (
    MAX_RANGES,
    ByteRange,
    ascii_file_name,
    content_disposition,
    content_type_safe,
    etag_for,
    if_range_holds,
    inline_allowed,
    range_answer,
    ranges_parse,
)

ETAG = '"AgADxyz"'


def answer(header, size=1000, if_range=None):
    a = range_answer(range_header=header, if_range=if_range, etag=ETAG, size=size)
    return a.status, (a.part.start, a.part.end), a.headers()


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("bytes=0-0", (206, (0, 1), "bytes 0-0/1000")),
        ("bytes=0-499", (206, (0, 500), "bytes 0-499/1000")),
        ("bytes=500-", (206, (500, 1000), "bytes 500-999/1000")),
        ("bytes=999-", (206, (999, 1000), "bytes 999-999/1000")),
        ("bytes=-1", (206, (999, 1000), "bytes 999-999/1000")),
        ("bytes=-500", (206, (500, 1000), "bytes 500-999/1000")),
        ("bytes=-5000", (206, (0, 1000), "bytes 0-999/1000")),  # a suffix longer than the file: all of it
        ("bytes=900-5000", (206, (900, 1000), "bytes 900-999/1000")),  # the last byte past the end is cut
        ("bytes=0-", (206, (0, 1000), "bytes 0-999/1000")),
        ("BYTES = 10-19", (206, (10, 20), "bytes 10-19/1000")),  # the unit is case-insensitive
        ("bytes= 10-19 ,", (206, (10, 20), "bytes 10-19/1000")),  # empty list elements are allowed
    ],
)
def test_a_single_satisfiable_range_is_206_with_exactly_its_bytes(header, expected):
    status, part, headers = answer(header)
    assert (status, part, headers["Content-Range"]) == expected
    assert headers["Content-Length"] == str(part[1] - part[0])


@pytest.mark.parametrize("header", ["bytes=1000-", "bytes=1000-1000", "bytes=5000-6000", "bytes=-0", "bytes=1000-,2000-"])
def test_a_range_set_with_nothing_satisfiable_is_416_naming_the_size(header):
    status, _, headers = answer(header)
    assert status == 416
    assert headers == {"Content-Range": "bytes */1000"}


@pytest.mark.parametrize(
    "header",
    [
        "items=0-10",  # another unit
        "bytes",
        "bytes=",
        "bytes=,",
        "bytes=abc",
        "bytes=5-3",  # last before first: invalid (RFC 9110 §14.1.1), so the whole header is ignored
        "bytes=0-1,5-3",
        "bytes=--5",
        "bytes=-",
        "bytes=1.5-2",
        "bytes=+1-2",
        "bytes=0x10-20",
        "bytes=0-1;2-3",
        "bytes=" + ",".join(f"{i * 2}-{i * 2}" for i in range(MAX_RANGES + 1)),  # too many ranges
    ],
)
def test_a_header_that_is_not_a_valid_bytes_range_set_is_ignored(header):
    assert answer(header) == (200, (0, 1000), {"Content-Length": "1000"})


def test_no_range_header_is_the_whole_file_with_200():
    assert answer(None) == (200, (0, 1000), {"Content-Length": "1000"})


def test_ranges_that_overlap_or_touch_are_merged_into_one_206():
    assert answer("bytes=0-9,10-19")[:2] == (206, (0, 20))
    assert answer("bytes=50-99, 0-60")[:2] == (206, (0, 100))
    assert answer("bytes=0-9, -995")[:2] == (206, (0, 1000))  # the suffix -995 starts at 5
    assert answer("bytes=0-9, 5000-6000")[:2] == (206, (0, 10))  # the unsatisfiable one is left out


def test_ranges_apart_are_answered_with_the_whole_file():
    assert answer("bytes=0-9,20-29") == (200, (0, 1000), {"Content-Length": "1000"})
    assert answer("bytes=0-0,-1") == (200, (0, 1000), {"Content-Length": "1000"})


def test_an_empty_file_has_no_byte_to_range_over():
    assert answer("bytes=0-", size=0)[0] == 416
    assert answer("bytes=0-0", size=0)[2] == {"Content-Range": "bytes */0"}
    assert answer("bytes=-10", size=0) == (200, (0, 0), {"Content-Length": "0"})
    assert answer(None, size=0) == (200, (0, 0), {"Content-Length": "0"})


def test_if_range_honours_the_range_only_for_the_files_own_strong_etag():
    assert answer("bytes=0-9", if_range=ETAG)[0] == 206
    assert answer("bytes=0-9", if_range=' "AgADxyz" ')[0] == 206
    assert answer("bytes=0-9", if_range='"other"')[:2] == (200, (0, 1000))
    assert answer("bytes=0-9", if_range="W/" + ETAG)[:2] == (200, (0, 1000))  # weak: never for If-Range
    assert answer("bytes=0-9", if_range="Sun, 06 Nov 1994 08:49:37 GMT")[:2] == (200, (0, 1000))  # no Last-Modified
    assert answer("bytes=5000-", if_range='"other"')[0] == 200  # not a 416: the range does not apply
    assert if_range_holds(None, ETAG)


def test_ranges_parse_keeps_what_was_written():
    assert ranges_parse("bytes=0-99, -500,7-") == [(0, 99), (None, 500), (7, None)]
    assert ranges_parse("bytes=0-99;x") is None


def _model(header: str | None, size: int) -> tuple[int, tuple[int, int]]:
    """A second reading of RFC 9110, written as directly as it reads, byte by byte."""
    whole = (200, (0, size))
    if header is None:
        return whole
    m = re.fullmatch(r"\s*bytes\s*=(.*)", header, re.I)
    if not m:
        return whole
    items = [p.strip() for p in m[1].split(",") if p.strip()]
    if not items or len(items) > MAX_RANGES:
        return whole
    wanted, suffix_of_empty = set(), False
    for item in items:
        if not re.fullmatch(r"\d+-\d*|-\d+", item):
            return whole
        a, b = item.split("-")
        if a == "":
            if size == 0 and int(b) > 0:
                suffix_of_empty = True
            wanted |= set(range(max(size - int(b), 0), size)) if int(b) else set()
        elif b and int(b) < int(a):
            return whole
        else:
            wanted |= set(range(int(a), min(int(b) + 1, size) if b else size))
    if suffix_of_empty:
        return whole
    if not wanted:
        return (416, (0, 0))
    lo, hi = min(wanted), max(wanted) + 1
    if len(wanted) != hi - lo:
        return whole  # bytes with a gap between them: several parts
    return (206, (lo, hi))


range_item = st.one_of(
    st.builds(lambda a, b: f"{a}-{b}", st.integers(0, 80), st.integers(0, 80)),
    st.builds(lambda a: f"{a}-", st.integers(0, 80)),
    st.builds(lambda n: f"-{n}", st.integers(0, 80)),
    st.sampled_from(["", "x", "1-2-3", " 3 - 4"]),
)


@given(
    items=st.lists(range_item, min_size=0, max_size=4),
    unit=st.sampled_from(["bytes=", "Bytes=", "bytes =", "items=", ""]),
    size=st.integers(0, 70),
)
def test_every_answer_agrees_with_a_byte_by_byte_model(items, unit, size):
    header = unit + ",".join(items)
    status, part, headers = answer(header, size=size)
    assert (status, part) == _model(header, size)
    if status == 206:
        assert headers["Content-Range"] == f"bytes {part[0]}-{part[1] - 1}/{size}"


def test_byte_range_length():
    assert ByteRange(3, 10).length == 7


def test_the_etag_is_strong_and_quoted_from_the_unique_id():
    assert etag_for("AgADxyz") == '"AgADxyz"'
    assert etag_for('a"b\\c d') == '"abcd"'


@pytest.mark.parametrize(
    ("mime", "expected", "inline"),
    [
        ("video/mp4", "video/mp4", True),
        ("Video/MP4; codecs=avc1", "video/mp4", True),
        ("audio/mpeg", "audio/mpeg", True),
        ("image/png", "image/png", True),
        ("text/plain", "text/plain", True),
        ("text/html", "text/html", False),
        ("application/xhtml+xml", "application/xhtml+xml", False),
        ("image/svg+xml", "image/svg+xml", False),
        ("text/xml", "text/xml", False),
        ("application/xml", "application/xml", False),
        ("text/javascript", "text/javascript", False),
        ("application/javascript", "application/javascript", False),
        ("application/pdf", "application/pdf", False),
        ("multipart/x-mixed-replace", "multipart/x-mixed-replace", False),
        ("", "application/octet-stream", False),
        ("video", "application/octet-stream", False),
        ("text/html\r\nX-Evil: 1", "application/octet-stream", False),
        ("vidéo/mp4", "application/octet-stream", False),
    ],
)
def test_the_type_is_the_files_when_well_formed_and_active_content_is_never_inline(mime, expected, inline):
    assert content_type_safe(mime) == expected
    assert inline_allowed(content_type_safe(mime)) is inline


@pytest.mark.parametrize(
    ("name", "fallback", "encoded"),
    [
        ("movie.mp4", "movie.mp4", "movie.mp4"),
        ("Café déjà vu.mkv", "Cafe deja vu.mkv", "Caf%C3%A9%20d%C3%A9j%C3%A0%20vu.mkv"),
        ("日本語.mp4", "___.mp4", "%E6%97%A5%E6%9C%AC%E8%AA%9E.mp4"),
        ('a"b\\c;d/e%f.txt', "a_b_c_d_e_f.txt", "a%22b%5Cc%3Bd%2Fe%25f.txt"),
        ("日本", "file", "%E6%97%A5%E6%9C%AC"),
        ("", "file", "file"),
        ("line\r\nX-Evil: 1", "line  X-Evil: 1", "line%20%20X-Evil%3A%201"),
        ("🎬 film.mp4", "_ film.mp4", "%F0%9F%8E%AC%20film.mp4"),
    ],
)
def test_content_disposition_has_an_ascii_fallback_and_the_exact_name(name, fallback, encoded):
    header = content_disposition(name=name, inline=False)
    assert header == f"attachment; filename=\"{fallback}\"; filename*=UTF-8''{encoded}"
    assert header.isascii() and "\r" not in header and "\n" not in header
    assert content_disposition(name=name, inline=True).startswith("inline; ")


def test_ascii_file_name_has_a_default():
    assert ascii_file_name("...", default="video.mp4") == "video.mp4"
