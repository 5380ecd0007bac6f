"""Proofs for a read-only auditor: no write access to the tenant is needed (issue 5).

Tests run as root, where permission bits stop nothing, so "cannot write" is simulated: every
open for writing, temp file and truncation under the tenant folder raises the error a real
read-only tenant gives (``EACCES``, or ``EROFS`` for a read-only mount).
"""

from __future__ import annotations

import builtins
import errno
import json
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from merkle_memory.cli import main
from merkle_memory.errors import LedgerBrokenError, LedgerError
from merkle_memory.ledger import Ledger
from merkle_memory.ledger.proofs import prove_consistency, prove_inclusion, tree_head
from merkle_memory.proof import verify_consistency, verify_inclusion

_WRITE = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _ledger(folder: Path, n: int) -> Ledger:
    led = Ledger(folder / "ledger.jsonl")
    led.append_many([(f"m{i % 5}", f"{i:064x}") for i in range(n)], ts=1_700_000_000)
    return led


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(params=[errno.EACCES, errno.EROFS], ids=["EACCES", "EROFS"])
def read_only(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """``read_only(folder)`` makes every write under ``folder`` fail with the errno given."""
    code: int = request.param
    guarded: list[str] = []

    def inside(path: Any) -> bool:
        text = os.path.abspath(os.fsdecode(path))
        return any(text == g or text.startswith(g + os.sep) for g in guarded)

    def deny(path: Any) -> None:
        raise OSError(code, os.strerror(code), os.fsdecode(path))

    real_open, real_builtin_open, real_mkstemp = os.open, builtins.open, tempfile.mkstemp

    def fake_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & _WRITE and inside(path):
            deny(path)
        return real_open(path, flags, *args, **kwargs)

    def fake_builtin_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if isinstance(file, str | os.PathLike) and set(mode) & set("wax+") and inside(file):
            deny(file)
        return real_builtin_open(file, mode, *args, **kwargs)

    def fake_mkstemp(*args: Any, **kwargs: Any) -> Any:
        folder = kwargs.get("dir")
        if folder is not None and inside(folder):
            deny(folder)
        return real_mkstemp(*args, **kwargs)

    monkeypatch.setattr(os, "open", fake_os_open)
    monkeypatch.setattr(builtins, "open", fake_builtin_open)
    monkeypatch.setattr(tempfile, "mkstemp", fake_mkstemp)
    yield lambda folder: guarded.append(os.path.abspath(folder))


def test_proofs_without_a_sidecar_are_computed_in_memory(
    tmp_path: Path, read_only: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """With no sidecar and no write access, inclusion, consistency and the tree head are
    computed from the ledger alone (a debug record says so), verify, equal the sidecar's
    answers, and nothing is written."""
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    _ledger(ro, 23)
    _ledger(rw, 23)
    assert _snapshot(ro)["ledger.jsonl"] == _snapshot(rw)["ledger.jsonl"]
    expected = (
        prove_inclusion(rw, "m3").to_dict(),
        prove_consistency(rw, 9).to_dict(),
        tree_head(rw, "o.example/t").to_text(),
    )
    before = _snapshot(ro)
    read_only(ro)
    caplog.set_level(logging.DEBUG, logger="merkle_memory.ledger")
    inclusion = prove_inclusion(ro, "m3")
    assert [r.getMessage().endswith(": proving in memory") for r in caplog.records] == [True]
    consistency = prove_consistency(ro, 9)
    head = tree_head(ro, "o.example/t")
    assert (inclusion.to_dict(), consistency.to_dict(), head.to_text()) == expected
    assert (inclusion.leaf_index, inclusion.tree_size) == (18, 23)
    verify_inclusion(inclusion.leaf_hash, 18, 23, inclusion.inclusion_proof, head.root)
    verify_consistency(9, 23, consistency.consistency_proof, consistency.old_root, head.root)
    assert _snapshot(ro) == before


def test_a_current_sidecar_is_used_and_a_stale_one_falls_back(
    tmp_path: Path, read_only: Any
) -> None:
    """A sidecar already current serves read-only proofs; after new entries it cannot be
    caught up, so the proof covers them in memory (it is never stale) and the files are left
    as they were."""
    led = _ledger(tmp_path, 10)
    prove_inclusion(tmp_path, "m1")  # writes the sidecar
    led.append("late", "f" * 64)
    before = _snapshot(tmp_path)
    read_only(tmp_path)
    proof = prove_inclusion(tmp_path, "late")
    assert (proof.leaf_index, proof.tree_size, proof.entry.memory_id) == (10, 11, "late")
    proof.verify(tree_head(tmp_path, "o").root)
    assert _snapshot(tmp_path) == before


def test_read_only_still_refuses_a_broken_chain(tmp_path: Path, read_only: Any) -> None:
    """An entry that does not chain is found by the in-memory scan too: no proof."""
    _ledger(tmp_path, 4)
    lines = (tmp_path / "ledger.jsonl").read_bytes().splitlines(keepends=True)
    entry = json.loads(lines[2])
    entry["prev"] = "0" * 64
    lines[2] = json.dumps(entry).encode() + b"\n"
    (tmp_path / "ledger.jsonl").write_bytes(b"".join(lines))
    read_only(tmp_path)
    with pytest.raises(LedgerBrokenError, match="chain broken at seq 3"):
        prove_inclusion(tmp_path, "m0")
    with pytest.raises(LedgerBrokenError):
        tree_head(tmp_path, "o")


def test_read_only_lock_creates_nothing_and_forbids_appends(tmp_path: Path) -> None:
    """locked(write=False) opens no missing file (FileNotFoundError) and an append inside it
    is refused with LedgerError, writing nothing."""
    led = Ledger(tmp_path / "ledger.jsonl")
    with pytest.raises(FileNotFoundError), led.locked(write=False):
        pass
    assert list(tmp_path.iterdir()) == []
    led.append("a", "a" * 64)
    size = (tmp_path / "ledger.jsonl").stat().st_size
    with led.locked(write=False), pytest.raises(LedgerError, match="read-only lock"):
        led.append("b", "b" * 64)
    assert (tmp_path / "ledger.jsonl").stat().st_size == size


def test_cli_prove_checkpoint_consistency_read_only(
    tmp_path: Path, read_only: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger prove`, `checkpoint` and `consistency` succeed on a tenant the caller cannot
    write (exit 0, same output as a writable copy), and `verify-proof` accepts the proof."""
    ro, rw = tmp_path / "ro", tmp_path / "rw"
    _ledger(ro, 7)
    _ledger(rw, 7)
    commands = [
        ["ledger", "prove", "TENANT", "--memory-id", "m2", "--json"],
        ["ledger", "checkpoint", "TENANT", "--origin", "o.example/t", "-q"],
        ["ledger", "consistency", "TENANT", "--old-size", "3", "--json"],
    ]
    expected = []
    for argv in commands:
        assert main([str(rw) if a == "TENANT" else a for a in argv]) == 0
        expected.append(capsys.readouterr().out)
    read_only(ro)
    for argv, out in zip(commands, expected, strict=True):
        assert main([str(ro) if a == "TENANT" else a for a in argv]) == 0
        assert capsys.readouterr() == (out, "")
    assert sorted(p.name for p in ro.iterdir()) == ["ledger.head", "ledger.jsonl"]
    (tmp_path / "p.json").write_text(expected[0])
    root = json.loads(expected[0])["root_hash"]
    assert main(["ledger", "verify-proof", str(tmp_path / "p.json"), "--root", root]) == 0
