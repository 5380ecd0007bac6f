"""Transcript readers refuse a FIFO, a socket or a device before reading from it (opening a
FIFO for reading without ``O_NONBLOCK`` waits for a writer forever), with a
``TranscriptFormatError`` naming the file, in the API and on the command line."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import run_main

from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import FORMATS, detect_format, import_file
from merkle_memory.transcripts._common import open_regular, read_regular


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    """A FIFO with a writer thread waiting on it: a reader that opened it in blocking mode is
    given end of file at once (the test then fails on its assertion instead of hanging), and
    the writer is released at the end either way."""
    path = tmp_path / "f.jsonl"
    os.mkfifo(path)

    def write() -> None:
        fd = os.open(path, os.O_WRONLY)  # blocks until some reader opens the FIFO
        os.close(fd)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    yield path
    release = os.open(path, os.O_RDONLY | os.O_NONBLOCK)  # lets the writer's open return
    writer.join()
    os.close(release)


def test_import_file_refuses_a_fifo(fifo: Path) -> None:
    """import_file, with detection and with every explicit format, refuses a FIFO."""
    for fmt in ["auto", *FORMATS]:
        with pytest.raises(TranscriptFormatError) as caught:
            import_file(fifo, fmt)
        assert str(caught.value) == f"{fifo}: not a regular file (a FIFO)", fmt
        assert caught.value.path == str(fifo)


def test_detect_format_refuses_a_fifo(fifo: Path) -> None:
    """detect_format reads a head: a FIFO is refused first."""
    with pytest.raises(TranscriptFormatError, match=r"not a regular file \(a FIFO\)$"):
        detect_format(fifo)


def test_cli_dag_import_refuses_a_fifo(fifo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``dag import FIFO``: one error line, exit 1, nothing on stdout."""
    code, out, err = run_main(capsys, "dag", "import", str(fifo))
    assert (code, out, err) == (1, "", f"error: {fifo}: not a regular file (a FIFO)\n")


def test_a_socket_and_a_device_are_refused(tmp_path: Path) -> None:
    """A socket and a character device are named as such; a folder stays an OSError."""
    sock_path = tmp_path / "s.jsonl"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(sock_path))
        with pytest.raises(OSError):  # a socket cannot be opened at all: ENXIO
            read_regular(sock_path)
    finally:
        server.close()
    with pytest.raises(TranscriptFormatError) as caught:
        read_regular("/dev/null")
    assert str(caught.value) == "/dev/null: not a regular file (a device)"
    with pytest.raises(IsADirectoryError):
        open_regular(tmp_path)


def test_open_regular_reads_a_file_in_blocking_mode(tmp_path: Path) -> None:
    """A regular file opens, reads whole and is left in blocking mode."""
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"x" * 70_000)
    with open_regular(path) as handle:
        assert os.get_blocking(handle.fileno()) is True
        assert handle.read() == b"x" * 70_000


@pytest.mark.parametrize("data", [b"", b"\n \n"])
def test_an_empty_jsonl_file_is_an_empty_transcript(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], data: bytes
) -> None:
    """Auto-detection reads an empty (or whitespace-only) ``.jsonl`` file as an empty
    transcript, as docs/CLI.md says; an empty ``.json`` file is still not a transcript."""
    path = tmp_path / "empty.jsonl"
    path.write_bytes(data)
    assert detect_format(path) == "claude-code"
    assert import_file(path).nodes == ()
    code, out, err = run_main(capsys, "dag", "import", str(path))
    assert (code, err) == (0, "")
    assert out == (
        "1 file (claude-code): 0 messages, 0 skipped -> 0 nodes, 0 roots, 0 leaves, "
        "0 branch points\n"
    )
    other = tmp_path / "empty.json"
    other.write_bytes(data)
    with pytest.raises(TranscriptFormatError, match="cannot detect the transcript format"):
        detect_format(other)
