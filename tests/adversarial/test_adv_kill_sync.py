"""SIGKILL at random points of ``dag sync`` (issue 17): 50 kills while sessions grow, then one
sync gives the same store as an uninterrupted sync of the final files.

Each round appends a random number of lines to some of the sessions, forks a child (a copy of
this process, ``merkle_memory`` already imported) that runs ``merkle-memory dag sync`` on the
folder, and kills it with SIGKILL after a random short delay, often in the middle of a file's
transaction. After each kill the store must open and verify. At the end every session is
complete, one more sync runs, and its nodes (hash, parent, bucket, metadata), its archived
files (path, size, digest, version) and every restored file must equal those of one sync of
the final folder into an empty store: nothing was lost, nothing duplicated, and no partial
node of an interrupted sync survived.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

from support import cc_line

from merkle_memory.cli import main
from merkle_memory.dag.store import SQLiteNodeStore, open_store, verify_store

KILLS = 50
"""Kills in CI; the soak variant runs ten times as many."""


def _claude(tag: str, turns: int) -> list[str]:
    lines: list[str] = []
    parent = None
    for turn in range(turns):
        user = f"{tag}-u{turn}"
        lines.append(cc_line(user, parent, "user", f"question {turn} of {tag}") + "\n")
        first = json.loads(cc_line(f"{tag}-a{turn}", user, "assistant", [
            {"type": "thinking", "thinking": f"thinking about {turn}"}]))  # fmt: skip
        first["message"]["id"] = f"m-{tag}-{turn}"
        call = {"type": "tool_use", "id": f"{tag}-t{turn}", "name": "Read", "input": {"n": turn}}
        second = json.loads(cc_line(f"{tag}-b{turn}", f"{tag}-a{turn}", "assistant", [call]))
        second["message"]["id"] = f"m-{tag}-{turn}"
        lines += [json.dumps(first) + "\n", json.dumps(second) + "\n"]
        result = [{"type": "tool_result", "tool_use_id": f"{tag}-t{turn}", "content": "x" * 200}]
        lines.append(cc_line(f"{tag}-r{turn}", f"{tag}-b{turn}", "user", result) + "\n")
        lines.append(cc_line(f"{tag}-c{turn}", f"{tag}-r{turn}", "assistant", "done") + "\n")
        parent = f"{tag}-c{turn}"
    return lines


def _codex(turns: int) -> list[str]:
    def item(payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": "t", "type": "response_item", "payload": payload}) + "\n"

    lines = [json.dumps({"timestamp": "t", "type": "session_meta", "payload": {"id": "x"}}) + "\n"]
    for turn in range(turns):
        lines.append(json.dumps({"type": "turn_context", "payload": {"model": f"m{turn}"}}) + "\n")
        lines.append(item({"type": "message", "role": "user",
                           "content": [{"type": "input_text", "text": f"do {turn}"}]}))  # fmt: skip
        lines.append(item({"type": "function_call", "name": "sh", "arguments": "{}",
                           "call_id": f"c{turn}"}))  # fmt: skip
        lines.append(item({"type": "function_call_output", "call_id": f"c{turn}", "output": "ok"}))
    return lines


def _aider(turns: int) -> list[str]:
    lines = ["# aider chat started at 2026-01-01 10:00:00\n", "> Model: m  \n"]
    for turn in range(turns):
        lines += [f"#### change {turn}  \n", "\n", f"Changed {turn}.\n", "\n", "> Applied  \n"]
    return lines


def _sessions() -> dict[str, list[str]]:
    return {
        **{f"cc{i}.jsonl": _claude(f"s{i}", 12) for i in range(6)},
        "rollout.jsonl": _codex(30),
        ".aider.chat.history.md": _aider(30),
    }


def _rows(db: Path) -> tuple[list[Any], list[Any]]:
    con = sqlite3.connect(db)
    try:
        nodes = sorted(con.execute("SELECT hash, parent_hash, bucket, metadata FROM nodes"))
        files = sorted(con.execute("SELECT path, format, size, digest, version FROM files"))
    finally:
        con.close()
    return nodes, files


def _sync_child(folder: Path, db: Path) -> int:
    pid = os.fork()
    if pid == 0:  # the child never returns into pytest
        code = 3
        try:
            code = main(["dag", "sync", str(folder), "--store", str(db), "-q", "--json"])
        finally:
            os._exit(code)
    return pid


def test_kill_sync_at_random_points(tmp_path: Path, soak: bool) -> None:
    """50 SIGKILLs during syncs of growing sessions; the store stays sound, and a last sync
    gives exactly the store of one uninterrupted sync of the final files."""
    rng = random.Random(int(os.environ.get("MERKLE_MEMORY_KILL_SEED", "1717")))
    sessions = _sessions()
    folder = tmp_path / "sessions"
    folder.mkdir()
    written = dict.fromkeys(sessions, 0)
    db = tmp_path / "archive.db"
    killed = 0
    for _ in range(KILLS * (10 if soak else 1)):
        for name, lines in sessions.items():
            if written[name] < len(lines) and rng.random() < 0.5:
                written[name] = min(len(lines), written[name] + rng.randint(1, 9))
                (folder / name).write_text("".join(lines[: written[name]]))
        pid = _sync_child(folder, db)
        time.sleep(rng.choice([0.0, 0.002, 0.01]) if rng.random() < 0.2 else rng.uniform(0.01, 0.2))
        os.kill(pid, signal.SIGKILL)
        _, status = os.waitpid(pid, 0)
        assert not (os.WIFEXITED(status) and os.WEXITSTATUS(status) != 0), status
        killed += os.WIFSIGNALED(status)
        if db.exists():
            with open_store(db) as store:
                assert verify_store(store).ok
    with open_store(db) as store:
        assert isinstance(store, SQLiteNodeStore)
        archived = len(store.archived_files())
    print(f"{killed} syncs killed before they ended; {archived} files archived by then")
    for name, lines in sessions.items():
        (folder / name).write_text("".join(lines))
    assert main(["dag", "sync", str(folder), "--store", str(db), "-q"]) == 0
    reference = tmp_path / "reference.db"
    assert main(["dag", "sync", str(folder), "--store", str(reference), "-q"]) == 0
    assert _rows(db) == _rows(reference)
    with open_store(db) as store:
        assert isinstance(store, SQLiteNodeStore)
        for name in sessions:
            path = str(folder / name)
            assert b"".join(store.archived_bytes(path)) == (folder / name).read_bytes()
