"""Files in a tenant that are not what they seem: symlinks and FIFOs (issue 14 items 3 and 7).

A symlink planted in place of a file of the ledger's store (``ledger.jsonl``, ``ledger.head``,
``ledger.torn``, ``ledger.tree``, ``ledger.tree.state``) or of a tenant under ``ROOT/agents/``
never makes the library read or write outside the store: the file is refused with
``StoreFileError``, and every file outside is byte for byte what it was (hashed before and
after). A FIFO is never opened in a way that blocks; ``verify --all`` reports the tenant and
goes on. Everything that could hang runs in a subprocess bounded by a timeout.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from support import run_main

import merkle_memory
from merkle_memory.errors import StoreFileError
from merkle_memory.ledger import Ledger
from merkle_memory.ledger.proofs import prove_consistency, prove_inclusion, sync, tree_head
from merkle_memory.ledger.tenant import Tenant, discover_tenants

TIMEOUT = 60
TORN = b'{"seq":3,"ts"'
STORE_FILES = (
    "ledger.jsonl",
    "ledger.head",
    "ledger.torn",
    "ledger.tree",
    "ledger.tree.state",
    "ledger.ids",
)


def _snapshot(folder: Path) -> dict[str, str]:
    """Every entry under ``folder``: its relative name and the SHA-256 of a file's bytes."""
    found = {}
    for path in sorted(folder.rglob("*")):
        name = str(path.relative_to(folder))
        found[name] = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
    return found


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside every store: a 10 KiB file (a shell rc, say) and a valid ledger."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim").write_bytes(b"# rc file\n" * 1024)
    led = Ledger(folder / "ledger.jsonl")
    led.append("outside-1", "a" * 64, ts=1_700_000_000)
    return folder


def _tenant(root: Path) -> Tenant:
    tenant = Tenant(root)
    tenant.save({"id": "a", "summary": "first"})
    tenant.save({"id": "b", "summary": "second"})
    sync(tenant.ledger)
    return tenant


def _plant(path: Path, target: Path) -> None:
    if path.exists():
        path.unlink()
    path.symlink_to(target)


def _attempts(tenant: Tenant) -> dict[str, Callable[[], Any]]:
    return {
        "save": lambda: tenant.save({"id": "c", "summary": "third"}),
        "seal": tenant.seal,
        "verify": tenant.verify,
        "prove": lambda: prove_inclusion(tenant.ledger, "a"),
        "consistency": lambda: prove_consistency(tenant.ledger, 1),
        "checkpoint": lambda: tree_head(tenant.ledger, "o.example/t"),
    }


# Which operations open each file (and so must refuse it); the others may succeed, but no
# operation may change a file outside the store.
REFUSED_BY: dict[str, set[str]] = {
    "ledger.jsonl": {"save", "seal", "verify", "prove", "consistency", "checkpoint"},
    "ledger.head": {"save", "seal", "verify", "prove", "consistency", "checkpoint"},  # proofs too
    "ledger.torn": {"save", "seal"},  # both quarantine the torn tail first
    "ledger.tree": {"prove", "consistency", "checkpoint"},
    "ledger.tree.state": {"prove", "consistency", "checkpoint"},
    "ledger.ids": {"prove", "consistency", "checkpoint"},  # the save made the sync update it
}


@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-file", "dangling"])
@pytest.mark.parametrize("name", STORE_FILES)
def test_a_planted_symlink_is_refused_and_nothing_outside_changes(
    name: str, dangling: bool, tmp_path: Path, outside: Path
) -> None:
    """``<name>`` -> a file outside (or a missing one): every operation that opens it raises
    StoreFileError naming it; no file outside changes and a dangling target is not created."""
    tenant = _tenant(tmp_path / "t")
    target = outside / ("missing" if dangling else "victim")
    _plant(tenant.root / name, target)
    if name == "ledger.torn":
        with (tenant.root / "ledger.jsonl").open("ab") as handle:
            handle.write(TORN)  # a torn tail, so that seal quarantines
    before = _snapshot(outside)
    refused = set()
    for operation, attempt in _attempts(tenant).items():
        try:
            attempt()
        except StoreFileError as exc:
            assert exc.path == str(tenant.root / name)
            assert exc.reason == "a symbolic link (never followed)"
            refused.add(operation)
        assert _snapshot(outside) == before, operation
    assert refused == REFUSED_BY[name]
    assert os.readlink(tenant.root / name) == str(target)


def test_a_symlinked_record_file_is_replaced_not_written_through(
    tmp_path: Path, outside: Path
) -> None:
    """memory/<id>.json -> an outside file: verify does not read it, a save replaces the link
    itself (an atomic rename), the outside file is untouched."""
    tenant = _tenant(tmp_path / "t")
    _plant(tenant.memory_dir / "a.json", outside / "victim")
    before = _snapshot(outside)
    report = tenant.verify()
    assert report.altered == ("a",) and not report.ok
    tenant.save({"id": "a", "summary": "again"})
    assert not (tenant.memory_dir / "a.json").is_symlink()
    assert _snapshot(outside) == before


def test_seal_all_never_follows_a_symlinked_tenant(
    tmp_path: Path, outside: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """ROOT/agents/evil -> a tenant-like folder elsewhere: discover_tenants skips it, seal
    --all says so and writes nothing there; the real tenants are sealed."""
    (outside / "memory").mkdir()
    (outside / "memory" / "x.json").write_text('{"id": "x", "summary": "unsealed"}')
    root = tmp_path / "root"
    _tenant(root / "agents" / "good")
    (root / "agents" / "evil").symlink_to(outside)
    before = _snapshot(outside)
    assert discover_tenants(root) == ([root / "agents" / "good"], ["evil"])
    code, out, err = run_main(capsys, "ledger", "seal", "--all", str(root), "--json")
    assert code == 0 and list(json.loads(out)) == ["good"]
    assert "skipped evil: a symbolic link (never followed)" in err
    assert _snapshot(outside) == before
    other = tmp_path / "other"
    other.mkdir()
    (other / "agents").symlink_to(root / "agents")
    assert discover_tenants(other) == ([], ["agents"])
    code, out, err = run_main(capsys, "ledger", "seal", "--all", str(other))
    assert code == 1 and "skipped agents: a symbolic link (never followed)" in err


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(merkle_memory.__file__).parents[1])}
    return subprocess.run(
        [sys.executable, "-m", "merkle_memory", *argv],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env=env,
        check=False,
    )


def test_a_fifo_ledger_does_not_stop_verify_all(tmp_path: Path) -> None:
    """ROOT/agents/a/ledger.jsonl is a FIFO: verify --all reports tenant a (exit 1) without
    blocking, and tenant b after it is verified ok."""
    root = tmp_path / "root"
    first = _tenant(root / "agents" / "a")
    _tenant(root / "agents" / "b")
    first.ledger.path.unlink()
    os.mkfifo(first.ledger.path)
    done = _cli("ledger", "verify", "--all", str(root), "--json")
    assert done.returncode == 1
    doc = json.loads(done.stdout)
    message = f"{first.ledger.path}: not a regular file (a FIFO)"
    assert doc["a"] == {"ok": False, "error": message}
    assert doc["b"]["ok"] is True and doc["b"]["sealed"] == 2
    assert done.stderr == f"error: a: {message}\n"


@pytest.mark.parametrize("name", STORE_FILES[1:])
def test_a_fifo_beside_the_ledger_never_blocks(name: str, tmp_path: Path) -> None:
    """A FIFO as the head, the quarantine, the sidecar, its state or the id index: seal,
    verify, prove and checkpoint each finish (exit 0 when they never open that file, else 1
    with one error line naming it)."""
    tenant = _tenant(tmp_path / "t")
    path = tenant.root / name
    if path.exists():
        path.unlink()
    os.mkfifo(path)
    if name == "ledger.torn":
        with tenant.ledger.path.open("ab") as handle:
            handle.write(TORN)
    if name == "ledger.ids":
        tenant.save({"id": "z", "summary": "z"})  # so that every sync updates the index
    runs = {
        "seal": _cli("ledger", "seal", str(tenant.root)),
        "verify": _cli("ledger", "verify", str(tenant.root)),
        "prove": _cli("ledger", "prove", str(tenant.root), "--memory-id", "a"),
        "checkpoint": _cli("ledger", "checkpoint", str(tenant.root), "--origin", "o", "-q"),
    }
    failed = {verb for verb, done in runs.items() if done.returncode}
    expected = {
        "ledger.head": {"seal", "verify", "prove", "checkpoint"},  # proofs check the head
        "ledger.torn": {"seal"},  # verify reports the torn tail (ok); seal cannot move it
        "ledger.tree": {"verify", "prove", "checkpoint"},  # verify checks the sidecar too
        "ledger.tree.state": {"prove", "checkpoint"},
        "ledger.ids": {"prove", "checkpoint"},
    }[name]
    assert failed == expected
    for verb in failed:
        assert runs[verb].returncode == 1
        last = runs[verb].stderr.splitlines()[-1]
        assert last.startswith("error: ") and "Traceback" not in runs[verb].stderr
        if verb != "verify" or name != "ledger.torn":
            assert last.endswith(f"{path}: not a regular file (a FIFO)")
    assert path.exists() and not path.is_file()
