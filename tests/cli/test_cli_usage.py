"""Smaller command-line fixes (issue 16 item 7): usage mistakes exit 2 with the usage of the
subcommand given, missing paths say "does not exist", plurals, `dag import --show-skipped`."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support import EXAMPLE_SESSION, run_main

from merkle_memory.dag import open_store
from merkle_memory.ledger.tenant import Tenant
from merkle_memory.transcripts import import_file


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["dag", "show", "1", "--store", "x"],
            "merkle-memory dag show: error: argument HASH: not a hash or a hash prefix (4-64 "
            "hex digits): '1'",
        ),
        (
            ["dag", "show", "xyz12", "--store", "x"],
            "merkle-memory dag show: error: argument HASH: not a hash or a hash prefix (4-64 "
            "hex digits): 'xyz12'",
        ),
        (
            ["ledger", "consistency", "T", "--old-size", "0"],
            "merkle-memory ledger consistency: error: argument --old-size: must be >= 1, not 0",
        ),
        (
            ["ledger", "consistency", "T", "--old-size", "two"],
            "merkle-memory ledger consistency: error: argument --old-size: not an integer: 'two'",
        ),
        (
            ["ledger", "verify", "T", "--bogus"],
            "merkle-memory ledger verify: error: unrecognized arguments: --bogus",
        ),
        (
            ["bank", "list", "B", "--frobnicate", "x"],
            "merkle-memory bank list: error: unrecognized arguments: --frobnicate x",
        ),
        (
            ["-q", "dag", "verify", "--store", "x", "extra"],
            "merkle-memory dag verify: error: unrecognized arguments: extra",
        ),
    ],
    ids=lambda value: " ".join(value[:3]) if isinstance(value, list) else None,
)
def test_usage_mistakes_exit_2_with_the_subcommand_usage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    """A malformed hash, a size below 1, an unknown flag or an extra argument after a
    subcommand: exit 2, that subcommand's usage (not the program's) and the message; no
    file is opened or created."""
    code, out, err = run_main(capsys, *argv)
    prog = message.split(": error: ")[0]  # e.g. "merkle-memory dag show"
    assert (code, out) == (2, "")
    assert err.startswith(f"usage: {prog} [-h]")
    assert err.splitlines()[-1] == message
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["canon", "{missing}"],
        ["dag", "import", "{missing}"],
        ["dag", "show", "abcd", "--store", "{missing}"],
        ["dag", "verify", "--store", "{missing}"],
        ["ledger", "verify", "{missing}"],
        ["ledger", "seal", "{missing}"],
        ["ledger", "verify", "--all", "{missing}"],
        ["ledger", "prove", "{missing}", "--memory-id", "x"],
        ["ledger", "consistency", "{missing}", "--old-size", "1"],
        ["ledger", "checkpoint", "{missing}", "--origin", "o"],
        ["ledger", "recover", "{missing}", "--accept-rollback"],
        ["ledger", "save", "{tenant}", "{missing}"],
        ["ledger", "import", "{missing}", "postgresql:///db?host=/nonexistent#t"],
        ["ledger", "forget", "{missing}", "a", "--reason", "r"],
        ["ledger", "tiles", "{missing}", "{tenant}", "--origin", "o", "--key", "{tenant}/k"],
        ["dag", "sync", "{missing}", "--store", "{tenant}"],
        ["ledger", "verify-proof", "{missing}", "--root", "ab"],
        ["bank", "list", "{missing}"],
        ["bank", "verify", "{missing}"],
        ["bank", "archive", "{missing}", "abcd"],
        ["bank", "consolidate", "{missing}", "abcd", "--content", "c"],
        ["bank", "migrate", "{missing}"],
        ["bank", "seal", "{missing}"],
        ["ledger", "keygen", "--name", "n", "--type", "hmac", "--out", "{missing}/k"],
        ["dag", "import", str(EXAMPLE_SESSION), "--store", "{missing}/dag.db"],
    ],
    ids=lambda argv: " ".join(argv[:2]),
)
def test_a_missing_path_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """Every command given a path that is not there: exit 1 and one line `error: PATH: does
    not exist` (the tenant's name for ledger verify|seal; the folder of a file a command
    would create), and nothing is created."""
    missing = tmp_path / "nowhere"
    args = [a.format(missing=missing, tenant=tmp_path / "T") for a in argv]
    code, out, err = run_main(capsys, *args)
    named = "nowhere" if argv[:2] in (["ledger", "verify"], ["ledger", "seal"]) else missing
    if "--all" in argv:
        named = missing
    assert code == 1
    assert err == f"error: {named}: does not exist\n", err
    assert out in ("", "{}\n") or json.loads(out).get("error")
    assert not missing.exists() and not (tmp_path / "T").exists()


def test_dag_verify_says_1_root(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`dag verify` of the example's store: `ok: 10 nodes, 1 root` (not "1 roots")."""
    store = tmp_path / "dag.db"
    with open_store(store) as opened:
        opened.put_many(import_file(EXAMPLE_SESSION).nodes)
    assert run_main(capsys, "dag", "verify", "--store", str(store)) == (
        0,
        "ok: 10 nodes, 1 root\n",
        "",
    )


def test_ledger_verify_says_1_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`ledger verify` of a tenant with one record: `(1 entry)`."""
    Tenant(tmp_path / "T").save({"id": "a"})
    code, out, _err = run_main(capsys, "ledger", "verify", str(tmp_path / "T"))
    assert (code, out.split(" · ")[0]) == (0, "T: ok: chain intact (1 entry)")


def test_dag_import_show_skipped_lists_each_line_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The example session skips line 1 (a file-history snapshot) and line 9 (a system
    line); a torn last line is skipped as torn. Text: `skipped FILE:LINE: why` after the
    summary; JSON: `skipped_lines` per file, only with the flag."""
    session = tmp_path / "s.jsonl"
    session.write_bytes(EXAMPLE_SESSION.read_bytes() + b'{"type": "user", "mess')
    code, out, _err = run_main(capsys, "dag", "import", str(session), "--show-skipped")
    assert code == 0
    assert out.splitlines()[0].startswith("1 file (claude-code): 13 messages, 3 skipped")
    assert out.splitlines()[-3:] == [
        f"skipped {session}:1: type 'file-history-snapshot' is not a message",
        f"skipped {session}:9: type 'system' is not a message",
        f"skipped {session}:16: a torn last line (not JSON and no newline: still being written)",
    ]
    code, out, _err = run_main(capsys, "dag", "import", str(session), "--json", "--show-skipped")
    lines = json.loads(out)["files"][0]["skipped_lines"]
    assert [entry["line"] for entry in lines] == [1, 9, 16]
    code, out, _err = run_main(capsys, "dag", "import", str(session), "--json")
    assert "skipped_lines" not in json.loads(out)["files"][0]


def test_show_skipped_names_a_non_utf8_file_as_json_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 3 finding 11: ``dag import --show-skipped`` names a file whose name is not UTF-8
    with ``\\xNN`` escapes (as ``--json`` does), never ``\\udcNN``."""
    session = os.fsdecode(bytes(tmp_path) + b"/bad\xff.jsonl")
    Path(session).write_bytes(EXAMPLE_SESSION.read_bytes())
    code, out, _err = run_main(capsys, "dag", "import", session, "--show-skipped")
    assert code == 0
    assert out.splitlines()[-2:] == [
        f"skipped {tmp_path}/bad\\xff.jsonl:1: type 'file-history-snapshot' is not a message",
        f"skipped {tmp_path}/bad\\xff.jsonl:9: type 'system' is not a message",
    ]


def test_codex_skipped_lines_say_why(tmp_path: Path) -> None:
    """A Codex rollout: envelopes without a response item and lines of other types are
    skipped, each with its reason."""
    records = [
        {"timestamp": "t", "type": "session_meta", "payload": {"id": "s1"}},
        {"timestamp": "t", "type": "turn_context", "payload": {"model": "m"}},
        {
            "timestamp": "t",
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hi"}],
            },
        },
        {"type": "compacted", "message": "x"},
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    result = import_file(path, "codex")
    assert result.skipped_lines == (
        (1, "envelope 'session_meta' holds no response item"),
        (2, "envelope 'turn_context' holds no response item"),
        (4, "type 'compacted' is not a response item"),
    )
    assert result.skipped == 3
