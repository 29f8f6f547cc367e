"""The server reads requests with kurigram's own generated code, and patches none of it."""

import inspect
import re

from pyrogram import raw
from pyrogram.raw.all import objects
from pyrogram.raw.core.primitives import Vector

from inmemory_telegram import wire


def test_every_vector_of_primitives_in_a_request_is_read_with_its_type():
    """What lets the server read a vector given no type as boxed objects (wire._Request)."""
    functions = [c for c in objects.values() if not isinstance(c, str) and c.__module__.startswith("pyrogram.raw.functions")]
    checked = 0
    for cls in functions:
        source = inspect.getsource(cls)
        for field, kind in re.findall(r"Vector\(self\.(\w+), (\w+)\)", source):
            assert re.search(rf"{field} = TLObject\.read\(b, {kind}\)", source), f"{cls.QUALNAME}.{field}"
            checked += 1
    assert len(functions) > 500 and checked > 50


def test_a_request_whose_last_vector_looks_like_longs_reads_as_objects():
    """kurigram's guess would read one InputMessageID (8 bytes left) as a long."""
    query = raw.functions.messages.GetMessages(id=[raw.types.InputMessageID(id=5)])
    assert wire.read_request(query.write()).id[0].id == 5


def test_a_container_of_requests_reads_each_the_same_way():
    queries = [raw.functions.messages.GetMessages(id=[raw.types.InputMessageID(id=i)]) for i in (7, 8)]
    container = raw.core.MsgContainer(
        [raw.core.Message(q, 4 * (i + 1), 2 * i + 1, len(q.write())) for i, q in enumerate(queries)]
    )
    read = wire.read_request(container.write())
    assert [m.body.id[0].id for m in read.messages] == [7, 8]


def test_kurigram_vector_read_is_its_own():
    assert Vector.read.__func__.__module__ == "pyrogram.raw.core.primitives.vector"


def test_a_file_part_answer_put_together_apart_is_what_kurigram_writes_and_as_long_as_counted():
    """The file DCs' process writes upload.getFile's answer itself (wire.FilePartAnswer); the
    bot's DC counts its length for the link's bandwidth before the bytes are read."""
    for length in (0, 1, 3, 253, 254, 255, 4096, 1024 * 1024):
        data = bytes(range(256)) * (length // 256) + bytes(length % 256)
        for photo in (False, True):
            answer = wire.rpc_result(99, wire.FilePart(5, 0, length, photo=photo, stored=False))
            file_type = raw.types.storage.FileJpeg() if photo else raw.types.storage.FilePartial()
            expected = wire.rpc_result(99, raw.types.upload.File(type=file_type, mtime=0, bytes=data))
            assert answer.written(data) == expected and len(answer) == len(expected), (length, photo)
