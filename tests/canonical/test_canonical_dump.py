"""canonical.dump: the RFC 8785 bytes written to a binary file object (issue 16 item 11)."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from merkle_memory import canonical
from merkle_memory.errors import IntegerDomainError, UnsupportedTypeError

VALUE = {"b": [1.0, 2e-7, "\u20ac"], "a": None}
BYTES = b'{"a":null,"b":[1,2e-7,"\xe2\x82\xac"]}'


def test_dump_writes_exactly_the_dumps_bytes_to_a_file(tmp_path: Path) -> None:
    """dump to a file opened 'wb' writes dumps(value), no newline; the file stays open."""
    path = tmp_path / "value.json"
    with path.open("wb") as fp:
        assert canonical.dump(VALUE, fp) is None
        assert not fp.closed
        fp.write(b"\n")
    assert canonical.dumps(VALUE) == BYTES
    assert path.read_bytes() == BYTES + b"\n"


def test_dump_to_bytesio_after_existing_content() -> None:
    """dump appends at the sink's position, like json.dump."""
    sink = io.BytesIO(b"x=")
    sink.seek(2)
    canonical.dump([True, {"k": 1}], sink)
    assert sink.getvalue() == b'x=[true,{"k":1}]'


class _Trickle(io.RawIOBase):
    """A raw sink that takes at most 3 bytes per write (as an unbuffered file may)."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.calls = 0

    def writable(self) -> bool:
        return True

    def write(self, b: object) -> int:
        chunk = bytes(memoryview(b))[:3]  # type: ignore[arg-type]
        self.data += chunk
        self.calls += 1
        return len(chunk)


def test_dump_finishes_a_short_raw_write() -> None:
    """A raw sink that takes 3 bytes a call gets all 29 bytes, in 10 calls."""
    sink = _Trickle()
    canonical.dump(VALUE, sink)
    assert bytes(sink.data) == BYTES
    assert (len(BYTES), sink.calls) == (29, 10)


def test_dump_to_an_unbuffered_file(tmp_path: Path) -> None:
    """open(path, 'wb', buffering=0) (a raw FileIO) receives the whole value."""
    path = tmp_path / "raw.json"
    with path.open("wb", buffering=0) as fp:
        canonical.dump(VALUE, fp)
    assert path.read_bytes() == BYTES


def test_a_non_blocking_raw_sink_that_takes_nothing_raises() -> None:
    """A raw write returning None (non-blocking, would block) is a BlockingIOError."""

    class Full(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, b: object) -> None:  # type: ignore[override]
            return None

    with pytest.raises(BlockingIOError):
        canonical.dump(VALUE, Full())


def test_a_text_file_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """A text file ('w', StringIO, a TextIOWrapper) is refused with UnsupportedTypeError
    (also a TypeError) saying to open it in binary mode; the file stays empty."""
    path = tmp_path / "text.json"
    refusal = pytest.raises(UnsupportedTypeError, match=r"text file: open it in binary mode")
    with path.open("w", encoding="utf-8") as fp, refusal:
        canonical.dump(VALUE, fp)
    assert path.read_bytes() == b""
    with pytest.raises(TypeError):
        canonical.dump(VALUE, io.StringIO())


def test_a_value_outside_the_domain_writes_nothing(tmp_path: Path) -> None:
    """The bytes are computed before the first write: an error leaves the file empty."""
    path = tmp_path / "bad.json"
    with path.open("wb") as fp, pytest.raises(IntegerDomainError):
        canonical.dump({"ok": 1, "id": 2**60}, fp)
    assert os.path.getsize(path) == 0


@pytest.mark.parametrize("sink", [None, "out.json", 42, object()])
def test_a_sink_without_write_is_refused_as_a_library_error(sink: object) -> None:
    """``dump(x, None)`` (or a path, or any object with no ``write``) raises
    UnsupportedTypeError naming the sink's type, never a raw AttributeError."""
    with pytest.raises(UnsupportedTypeError) as info:
        canonical.dump(VALUE, sink)  # type: ignore[arg-type]
    assert str(info.value).startswith(
        "canonical.dump writes to a binary file object (with a write method), not "
        f"{type(sink).__name__}"
    )
    assert info.value.value is sink
