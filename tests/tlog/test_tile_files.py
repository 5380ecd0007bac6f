"""Planted files in a tiles folder are refused, never followed, blocked on or read whole.

A FIFO, a symlink (to a regular file outside the folder, or to ``/dev/zero``) or an oversized
file in place of a tile, an entry bundle or the checkpoint raises ``TileError`` naming the file
and the reason, for the writer (``publish_tiles`` / ``ledger tiles``) and the client
(``TileClient`` / ``ledger verify-tiles``). Every call runs under a deadline, so a regression
that blocks on a FIFO fails the test instead of hanging the run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest
from support import run_main

from merkle_memory.errors import TileError
from merkle_memory.ledger import Ledger
from merkle_memory.signed_note import HmacKey
from merkle_memory.tlog import FolderTiles, TileClient, publish_tiles
from merkle_memory.tlog.tiles import MAX_CHECKPOINT_SIZE, MAX_RESOURCE_SIZE, read_log_file

ORIGIN = "example.com/agents/planted"
KEY = HmacKey("example.com/agents", bytes(range(7, 39)))
DEADLINE = 10.0

TILE = "tile/0/000.p/5"
BUNDLE = "tile/entries/000.p/5"
CHECKPOINT = "checkpoint"

_FIFO = "not a regular file (a FIFO)"
_SYMLINK = "a symbolic link (never followed)"

T = TypeVar("T")


def _within_deadline(call: Callable[[], T]) -> T:
    """``call()`` in a daemon thread; fail (rather than hang) when it does not return in time."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # handed to the test thread
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE)
    if thread.is_alive():
        pytest.fail(f"still blocked after {DEADLINE:g} s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


def _publish(tmp_path: Path) -> tuple[Path, Path]:
    """A 5-entry ledger and its published tiles folder."""
    tenant = tmp_path / "tenant"
    tenant.mkdir()
    Ledger(tenant / "ledger.jsonl").append_many(
        [(f"k{i}", f"{i:064x}") for i in range(5)], ts=1_700_000_000.0
    )
    out = tmp_path / "out"
    publish_tiles(tenant, out, ORIGIN, [KEY])
    return tenant, out


def _plant(out: Path, relative: str, kind: str, outside: Path) -> str:
    """Replace ``out/relative`` by a planted file of ``kind``; return the refusal's reason."""
    target = out / relative
    target.unlink()
    limit = MAX_CHECKPOINT_SIZE if relative == CHECKPOINT else MAX_RESOURCE_SIZE
    if kind == "fifo":
        os.mkfifo(target)
        return _FIFO
    if kind == "symlink-outside":
        outside.write_bytes(b"a regular file outside the tiles folder\n")
        target.symlink_to(outside)
        return _SYMLINK
    if kind == "symlink-dev-zero":
        target.symlink_to("/dev/zero")
        return _SYMLINK
    assert kind == "oversized"
    with open(target, "wb") as handle:
        handle.truncate(limit + 1)  # sparse: costs no disk
    return f"larger than {limit:,} bytes"


def _message(out: Path, relative: str, reason: str) -> str:
    limit = MAX_CHECKPOINT_SIZE if relative == CHECKPOINT else MAX_RESOURCE_SIZE
    return (
        f"{out / relative}: {reason}; refusing to read it (a tiled log's files are regular "
        f"files of at most {limit:,} bytes)"
    )


KINDS = ["fifo", "symlink-outside", "symlink-dev-zero", "oversized"]
FILES = [TILE, BUNDLE, CHECKPOINT]


@pytest.mark.parametrize("relative", FILES)
@pytest.mark.parametrize("kind", KINDS)
def test_the_writer_refuses_a_planted_file(tmp_path: Path, relative: str, kind: str) -> None:
    """Publishing again over a planted tile, bundle or checkpoint raises ``TileError`` with the
    file and the reason, and leaves the planted file in place."""
    tenant, out = _publish(tmp_path)
    reason = _plant(out, relative, kind, tmp_path / "outside")
    with pytest.raises(TileError) as caught:
        _within_deadline(lambda: publish_tiles(tenant, out, ORIGIN, [KEY]))
    assert type(caught.value) is TileError
    assert str(caught.value) == _message(out, relative, reason)
    assert caught.value.path == relative
    assert os.path.lexists(out / relative)


@pytest.mark.parametrize("relative", FILES)
@pytest.mark.parametrize("kind", KINDS)
def test_the_client_refuses_a_planted_file(tmp_path: Path, relative: str, kind: str) -> None:
    """Opening and auditing a folder with a planted tile, bundle or checkpoint raises
    ``TileError`` (not ``TileNotFoundError``) with the file and the reason."""
    _, out = _publish(tmp_path)
    reason = _plant(out, relative, kind, tmp_path / "outside")

    def audit() -> int:
        return TileClient.open(FolderTiles(out), [KEY], ORIGIN).audit()

    with pytest.raises(TileError) as caught:
        _within_deadline(audit)
    assert type(caught.value) is TileError
    assert str(caught.value) == _message(out, relative, reason)
    assert caught.value.path == relative


def test_read_log_file_reads_files_up_to_the_cap(tmp_path: Path) -> None:
    """A regular file of exactly the cap is read whole; a missing one is ``None``; a folder
    in its place is refused like any other file that is not regular."""
    exact = tmp_path / "exact"
    with open(exact, "wb") as handle:
        handle.truncate(MAX_CHECKPOINT_SIZE)
    assert read_log_file(exact, CHECKPOINT) == bytes(MAX_CHECKPOINT_SIZE)
    assert read_log_file(tmp_path / "missing", TILE) is None
    with pytest.raises(TileError, match=r"not a regular file \(a folder\)"):
        read_log_file(tmp_path, TILE)
    assert MAX_RESOURCE_SIZE == 256 * (0xFFFF + 2)


@pytest.mark.parametrize("relative", [TILE, CHECKPOINT])
def test_cli_prints_one_error_line_for_a_fifo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], relative: str
) -> None:
    """``ledger tiles`` and ``ledger verify-tiles`` over a FIFO planted in the folder exit 1
    with one ``error:`` line naming it, instead of blocking in ``open``."""
    tenant, out = _publish(tmp_path)
    key = tmp_path / "k.key"
    key.write_text(KEY.skey() + "\n")
    reason = _plant(out, relative, "fifo", tmp_path / "outside")
    expected = f"error: {_message(out, relative, reason)}\n"
    writer = ("ledger", "tiles", str(tenant), str(out), "--origin", ORIGIN, "--key", str(key))
    code, stdout, stderr = _within_deadline(lambda: run_main(capsys, *writer))
    assert (code, stdout, stderr) == (1, "", expected)
    client = ("ledger", "verify-tiles", str(out), "--key", str(key), "--origin", ORIGIN)
    code, stdout, stderr = _within_deadline(lambda: run_main(capsys, *client))
    assert (code, stdout, stderr) == (1, "", expected)


@pytest.mark.parametrize("planted", ["fifo", "/dev/zero", "folder"])
def test_cli_verify_checkpoint_refuses_a_file_that_is_not_regular(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], planted: str
) -> None:
    """``ledger verify-checkpoint FILE`` over a FIFO, ``/dev/zero`` or a folder exits 1 with
    one ``error:`` line; a symlink the user names to a real checkpoint is followed."""
    _, out = _publish(tmp_path)
    key = tmp_path / "k.key"
    key.write_text(KEY.skey() + "\n")
    if planted == "fifo":
        path, reason = str(tmp_path / "fifo"), _FIFO
        os.mkfifo(path)
    elif planted == "folder":
        path, reason = str(tmp_path), "not a regular file (a folder)"
    else:
        path, reason = planted, "not a regular file (a device or special file)"
    argv = ("ledger", "verify-checkpoint", path, "--key", str(key), "--origin", ORIGIN)
    code, stdout, stderr = _within_deadline(lambda: run_main(capsys, *argv))
    assert (code, stdout, stderr) == (1, "", f"error: {path}: {reason}: not a checkpoint file\n")
    link = tmp_path / "link"
    link.symlink_to(out / CHECKPOINT)
    argv = ("ledger", "verify-checkpoint", str(link), "--key", str(key), "--origin", ORIGIN)
    code, _, stderr = _within_deadline(lambda: run_main(capsys, *argv))
    assert code == 0, stderr
