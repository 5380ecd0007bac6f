"""``dag import --store``, ``dag show`` and ``dag verify``: output, JSON keys, exit codes, and a
SIGKILL during an import that leaves the SQLite store consistent."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import REPO

from merkle_memory import canonical
from merkle_memory.cli import main
from merkle_memory.transcripts import import_file

BODY = {
    "model": "claude-x",
    "system": "be brief",
    "messages": [
        {"role": "user", "content": "<system-reminder>noise</system-reminder>List /tmp"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Looking.\nsecond line"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"cmd": "ls"}},
            ],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "a"}]},
        {"role": "assistant", "content": "One file: a."},
    ],
}


def _import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, dict[str, object]]:
    src = tmp_path / "body.json"
    src.write_text(json.dumps(BODY))
    db = tmp_path / "nodes.db"
    assert main(["dag", "import", str(src), "--store", str(db), "--json"]) == 0
    captured = capsys.readouterr()
    assert "stored 4 new nodes" in captured.err
    return db, json.loads(captured.out)


def test_show_prints_ancestry_root_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """dag show: one line per node, root first: hash, role, first line of projected text."""
    db, doc = _import(tmp_path, capsys)
    leaf = doc["leaves"][0]  # type: ignore[index]
    assert main(["dag", "show", leaf, "--store", str(db)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines] == ["user", "assistant", "user", "assistant"]
    assert [line.split("  ", 2)[2].strip() for line in lines] == [
        "List /tmp",
        "Looking.",
        "[tool_result] a",
        "One file: a.",
    ]
    assert lines[-1].startswith(leaf)


def test_show_json_keys_and_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """dag show --json with a hash prefix: documented keys, nodes root first."""
    db, doc = _import(tmp_path, capsys)
    leaf = str(doc["leaves"][0])  # type: ignore[index]
    assert main(["dag", "show", leaf[:10], "--store", str(db), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == {"hash", "complete", "missing_parent", "cycle", "nodes"}
    assert out["hash"] == leaf and out["complete"] is True and out["cycle"] is False
    assert out["nodes"][0]["parent_hash"] is None
    assert out["nodes"][0]["hash"] == doc["roots"][0]  # type: ignore[index]
    assert set(out["nodes"][1]) == {
        "hash",
        "parent_hash",
        "role",
        "text",
        "parent_tool_use_id",
        "logical_parent",
        "model",
    }
    assert [n["text"] for n in out["nodes"]][1] == "Looking."


def test_show_displays_parent_tool_use_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A node carrying parent_tool_use_id metadata shows it in text and JSON output."""
    from merkle_memory.dag import Bucket, ContentBlock, Node
    from merkle_memory.dag.store import open_store

    node = Node.create(
        Bucket("message", "user", (ContentBlock("text", text="sub task"),)),
        None,
        {"parent_tool_use_id": "toolu_42"},
    )
    db = tmp_path / "n.db"
    with open_store(db) as store:
        store.put(node)
    assert main(["dag", "show", node.hash, "--store", str(db)]) == 0
    assert "[parent_tool_use_id: toolu_42]" in capsys.readouterr().out
    assert main(["dag", "show", node.hash, "--store", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["nodes"][0]["parent_tool_use_id"] == "toolu_42"


def test_show_unknown_and_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Unknown hash, or no store file: exit 1 with one 'error:' line (the store `does not
    exist`); no file is created."""
    db, _doc = _import(tmp_path, capsys)
    assert main(["dag", "show", "f" * 64, "--store", str(db)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    missing = tmp_path / "none.db"
    assert main(["dag", "show", "f" * 64, "--store", str(missing)]) == 1
    assert capsys.readouterr().err == f"error: {missing}: does not exist\n"
    assert not missing.exists()
    assert main(["dag", "verify", "--store", str(missing)]) == 1
    assert main(["dag", "show", "--store", str(db)]) == 2  # usage: HASH missing


@pytest.mark.parametrize("content", [b"", b"plain text, not SQLite\n" * 64])
@pytest.mark.parametrize("command", [["show", "f" * 64], ["verify"]])
def test_show_verify_refuse_a_file_that_is_not_a_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, command: list[str]
) -> None:
    """``dag show`` / ``dag verify`` on an existing empty or non-SQLite file: exit 1 with one
    'error:' line, and the file is left exactly as it was (no schema written into it)."""
    db = tmp_path / "x.db"
    db.write_bytes(content)
    assert main(["dag", *command, "--store", str(db)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err
    assert db.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]


def test_verify_ok_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """dag verify on an intact store: exit 0; --json keys and counts."""
    db, _doc = _import(tmp_path, capsys)
    assert main(["dag", "verify", "--store", str(db)]) == 0
    assert capsys.readouterr().out == "ok: 4 nodes, 1 root\n"
    assert main(["dag", "verify", "--store", str(db), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "ok": True,
        "nodes": 4,
        "roots": 1,
        "mismatches": [],
        "unreadable": [],
        "dangling": [],
        "cycles": [],
    }


def test_verify_reports_tampering(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An edited bucket and a deleted parent: exit 1, mismatch and dangling reported; show of a
    node below the hole reports the incomplete ancestry with exit 1."""
    db, doc = _import(tmp_path, capsys)
    root = str(doc["roots"][0])  # type: ignore[index]
    leaf = str(doc["leaves"][0])  # type: ignore[index]
    con = sqlite3.connect(db)
    with con:
        bucket = json.loads(
            con.execute("SELECT bucket FROM nodes WHERE hash=?", (leaf,)).fetchone()[0]
        )
        bucket["content"][0]["text"] = "Two files."
        con.execute(
            "UPDATE nodes SET bucket=? WHERE hash=?", (canonical.dumps(bucket).decode(), leaf)
        )
        con.execute("DELETE FROM nodes WHERE hash=?", (root,))
    con.close()
    assert main(["dag", "verify", "--store", str(db), "--json"]) == 1
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["ok"] is False
    assert [m["hash"] for m in report["mismatches"]] == [leaf]
    assert [d["parent_hash"] for d in report["dangling"]] == [root]
    assert captured.err.startswith("error: node store failed verification: 1 hash mismatch")
    assert main(["dag", "show", leaf, "--store", str(db)]) == 1
    captured = capsys.readouterr()
    assert len(captured.out.splitlines()) == 3
    assert f"parent {root} is not in the store" in captured.err


def test_verify_and_show_agree_on_unreadable_metadata(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Metadata set to 'xx' (not hashed): dag show cannot read the node, and dag verify
    reports the row unreadable with exit 1 instead of ok."""
    db, doc = _import(tmp_path, capsys)
    leaf = str(doc["leaves"][0])  # type: ignore[index]
    con = sqlite3.connect(db)
    with con:
        con.execute("UPDATE nodes SET metadata = 'xx' WHERE hash = ?", (leaf,))
    con.close()
    reason = "metadata: not JSON: Expecting value at offset 0"
    assert main(["dag", "show", leaf, "--store", str(db)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == f"error: stored node {leaf!r} cannot be read: {reason}\n"
    assert main(["dag", "verify", "--store", str(db)]) == 1
    captured = capsys.readouterr()
    assert captured.out == f"unreadable  {leaf}: {reason}\nFAILED: 4 nodes, 1 root\n"
    assert captured.err == (
        "error: node store failed verification: 0 hash mismatch(es), 1 unreadable row(s), "
        "0 dangling parent(s), 0 cycle(s)\n"
    )
    assert main(["dag", "verify", "--store", str(db), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False
    assert report["unreadable"] == [{"hash": leaf, "reason": reason}]


def test_show_subprocess(tmp_path: Path) -> None:
    """``python -m merkle_memory dag show`` in a subprocess: exit 0, four lines on stdout."""
    src = tmp_path / "body.json"
    src.write_text(json.dumps(BODY))
    db = tmp_path / "nodes.db"
    cmd = [sys.executable, "-m", "merkle_memory", "dag"]
    done = subprocess.run(
        [*cmd, "import", str(src), "--store", str(db), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
        check=True,
    )
    leaf = json.loads(done.stdout)["leaves"][0]
    shown = subprocess.run(
        [*cmd, "show", leaf, "--store", str(db)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=60,
    )
    assert shown.returncode == 0 and len(shown.stdout.splitlines()) == 4


@pytest.mark.slow
def test_sigkill_during_store_import_leaves_store_consistent(tmp_path: Path) -> None:
    """SIGKILL an importer while it writes the SQLite store: the store verifies (all of the
    import or none of it), and a rerun completes it with every node."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from gen_transcript import generate
    finally:
        sys.path.pop(0)
    src = tmp_path / "session.jsonl"
    with open(src, "w", encoding="utf-8") as handle:
        generate(handle, 4000, seed=7)
    db = tmp_path / "nodes.db"
    cmd = [sys.executable, "-m", "merkle_memory", "dag"]
    expected = len(import_file(src).nodes)  # the size of the complete import
    assert expected == 4000  # one node per turn: assistant lines of one message.id merge
    wal = Path(str(db) + "-wal")
    proc = subprocess.Popen(
        [*cmd, "import", str(src), "--store", str(db)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    # Kill once the transaction has started writing (the WAL grows past its header).
    while time.monotonic() < deadline and proc.poll() is None:
        if wal.exists() and wal.stat().st_size > 16 * 1024:
            break
        time.sleep(0.005)
    killed = proc.poll() is None
    if killed:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)
    assert killed, "the import finished before it could be killed"
    check = subprocess.run(
        [*cmd, "verify", "--store", str(db), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert check.returncode == 0, check.stdout + check.stderr
    after_kill = json.loads(check.stdout)["nodes"]
    print(f"nodes after SIGKILL: {after_kill} of {expected}")
    assert after_kill in (0, expected)  # one transaction: none or all
    rerun = subprocess.run(
        [*cmd, "import", str(src), "--store", str(db), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert rerun.returncode == 0, rerun.stderr
    final = subprocess.run(
        [*cmd, "verify", "--store", str(db), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    report = json.loads(final.stdout)
    assert final.returncode == 0 and report["ok"] is True
    assert report["nodes"] == expected
