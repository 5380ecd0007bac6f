"""``dag import/show/verify/sync/sessions/restore/forget --store postgresql://...``: the same
commands on the PostgreSQL node store, the same documents as on SQLite, and a SIGKILL
mid-import that leaves all of the import or none of it.

Needs the test server (tests/servers.py): skipped without it, failed under CI.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from servers import admin
from support import REPO, cc_line
from test_cli_dagstore import BODY

from merkle_memory.cli import main
from merkle_memory.dag.store import open_store
from merkle_memory.transcripts import import_file


def _import(url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    src = tmp_path / "body.json"
    src.write_text(json.dumps(BODY))
    assert main(["dag", "import", str(src), "--store", url, "--json"]) == 0
    captured = capsys.readouterr()
    assert "stored 4 new nodes" in captured.err
    return dict(json.loads(captured.out))


def test_import_show_verify_on_postgres(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """import --store URL, show by prefix and verify --json give what they give on SQLite."""
    doc = _import(postgres_url, tmp_path, capsys)
    leaf = str(doc["leaves"][0])  # type: ignore[index]
    assert main(["dag", "show", leaf[:8], "--store", postgres_url, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["hash"], shown["complete"], len(shown["nodes"])) == (leaf, True, 4)
    assert [n["role"] for n in shown["nodes"]] == ["user", "assistant", "user", "assistant"]
    assert main(["dag", "verify", "--store", postgres_url, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "ok": True, "nodes": 4, "roots": 1, "mismatches": [], "unreadable": [],
        "dangling": [], "cycles": [],
    }  # fmt: skip
    with admin(postgres_url) as conn:
        conn.execute("DELETE FROM mm_nodes WHERE parent_hash IS NULL")
    assert main(["dag", "verify", "--store", postgres_url]) == 1
    assert "1 dangling parent(s)" in capsys.readouterr().err
    assert main(["dag", "show", leaf, "--store", postgres_url]) == 1
    assert "ancestry is incomplete" in capsys.readouterr().err


def test_reading_commands_refuse_a_database_without_a_store(
    postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """show and verify on a database without the schema: exit 1, one error line."""
    assert main(["dag", "verify", "--store", postgres_url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: no node store at postgresql://") and err.count("\n") == 1


@pytest.mark.slow
def test_sigkill_during_postgres_import_keeps_all_or_nothing(
    postgres_url: str, tmp_path: Path
) -> None:
    """SIGKILL the importer once its transaction has written rows: the store verifies with
    none of the import (the server rolled the transaction back), and a rerun stores all."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        from gen_transcript import generate
    finally:
        sys.path.pop(0)
    src = tmp_path / "session.jsonl"
    with open(src, "w", encoding="utf-8") as handle:
        generate(handle, 4000, seed=7)
    expected = len(import_file(src).nodes)
    cmd = [sys.executable, "-m", "merkle_memory", "dag"]
    open_store(postgres_url).close()  # the schema first: the kill must hit the import
    proc = subprocess.Popen(
        [*cmd, "import", str(src), "--store", postgres_url],
        cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    written = (
        "SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL"
        " AND pid <> pg_backend_pid() AND datname = current_database()"
    )
    killed = False
    with admin(postgres_url) as conn:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if conn.execute(written).fetchone()[0]:
                os.kill(proc.pid, signal.SIGKILL)
                killed = True
                break
            time.sleep(0.002)
    proc.wait(timeout=60)
    assert killed, "the import finished before it could be killed"
    check = subprocess.run(
        [*cmd, "verify", "--store", postgres_url, "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    assert json.loads(check.stdout)["nodes"] == 0
    rerun = subprocess.run([*cmd, "import", str(src), "--store", postgres_url], cwd=REPO,
                           capture_output=True, timeout=300)  # fmt: skip
    assert rerun.returncode == 0, rerun.stderr
    final = subprocess.run([*cmd, "verify", "--store", postgres_url, "--json"], cwd=REPO,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
    assert (final.returncode, json.loads(final.stdout)["nodes"]) == (0, expected)


def test_sync_sessions_restore_forget_give_the_same_documents_on_both_stores(
    postgres_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same folder synced, grown, listed, restored and forgotten into a SQLite file and
    into PostgreSQL: every ``--json`` document is the same (the sync times aside), and so are
    the restored bytes and the ``dag verify`` report."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    lines = [
        cc_line(f"u{i}", f"u{i - 1}" if i else None, "user" if i % 2 == 0 else "assistant",
                f"turn {i} says hunter{i}") + "\n"
        for i in range(6)
    ]  # fmt: skip
    (folder / "a.jsonl").write_text("".join(lines[:3]))
    (folder / "b.jsonl").write_text("".join(lines))
    (folder / "notes.txt").write_text("not a transcript")

    def run(*argv: str) -> str:
        code = main(list(argv))
        captured = capsys.readouterr()
        assert code == 0, captured.err
        return captured.out

    def scenario(store: str) -> list[object]:
        docs: list[object] = []
        docs.append(json.loads(run("dag", "sync", str(folder), "--store", store, "--json")))
        docs.append(json.loads(run("dag", "sync", str(folder), "--store", store, "--json")))
        docs.append(
            [
                {k: v for k, v in item.items() if k not in ("first_sync", "last_sync")}
                for item in json.loads(run("dag", "sessions", "--store", store, "--json"))
            ]
        )
        docs.append(run("dag", "restore", "--store", store, str(folder / "b.jsonl"), "--out", "-"))
        node = import_file(folder / "a.jsonl").nodes[1].hash
        docs.append(json.loads(run("dag", "forget", "--store", store, node, "--json")))
        docs.append(json.loads(run("dag", "verify", "--store", store, "--json")))
        docs.append(json.loads(run("dag", "sync", str(folder), "--store", store, "--json")))
        return docs

    original = {p: p.read_bytes() for p in folder.iterdir()}
    on_sqlite = scenario(str(tmp_path / "archive.db"))
    for path, data in original.items():  # the forget touched no transcript: same input again
        assert path.read_bytes() == data
    on_postgres = scenario(postgres_url)
    assert on_postgres == on_sqlite
    assert on_sqlite[0] == {
        "files": 3, "new_files": 2, "updated_files": 0, "skipped": 1, "new_nodes": 6, "nodes": 6,
    }  # fmt: skip
    assert on_sqlite[3] == "".join(lines)
    assert on_sqlite[4] == {
        "hash": import_file(folder / "a.jsonl").nodes[1].hash,
        "pruned": True,
        "already_pruned": False,
        "purged_versions": [
            {"path": str(folder / "a.jsonl"), "version": 1},
            {"path": str(folder / "b.jsonl"), "version": 1},
        ],
    }
    assert on_sqlite[6] == {
        "files": 3, "new_files": 0, "updated_files": 2, "skipped": 1, "new_nodes": 0, "nodes": 6,
    }  # fmt: skip
