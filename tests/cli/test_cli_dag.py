"""Tests of `merkle-memory dag import` (DESIGN section 7)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import cc_line, shared_path

from merkle_memory import transcripts
from merkle_memory.cli import main
from merkle_memory.transcripts import FORMATS, Importer, ImportResult
from merkle_memory.transcripts.claude_code import read_file

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "claude_code_session.jsonl"
KEYS = ["format", "files", "messages", "skipped", "nodes", "roots", "leaves", "branch_points"]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["dag", "import", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    """--json prints one document with exactly the DESIGN keys and the example's shape."""
    code, out, err = _run(capsys, str(EXAMPLE), "--json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    assert list(doc) == KEYS
    assert doc["format"] == "claude-code"
    assert doc["files"] == [
        {"path": str(EXAMPLE), "format": "claude-code", "messages": 13, "skipped": 2}
    ]
    # Hand count of the example: 13 message lines (two assistant lines share msg_01A, two
    # harness-only user turns are dropped) -> 10 nodes; the rewind makes a-0003 a branch point.
    assert (doc["messages"], doc["skipped"], doc["nodes"]) == (13, 2, 10)
    assert (len(doc["roots"]), len(doc["leaves"]), len(doc["branch_points"])) == (1, 2, 1)
    nodes = {n.hash: n for n in read_file(EXAMPLE).nodes}
    assert nodes[doc["branch_points"][0]].metadata["uuids"] == ["a-0003"]
    assert [nodes[h].metadata["uuids"] for h in doc["leaves"]] == [["a-0004"], ["a-0006"]]
    assert nodes[doc["roots"][0]].metadata["uuids"] == ["u-0001"]


def test_human_summary(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --json a short summary and the leaves go to stdout."""
    code, out, _ = _run(capsys, str(EXAMPLE))
    lines = out.splitlines()
    assert code == 0
    assert lines[0] == (
        "1 file (claude-code): 13 messages, 2 skipped -> 10 nodes, 1 root, 2 leaves, 1 branch point"
    )
    assert len(lines) == 3 and all(line.startswith("leaf ") for line in lines[1:])


def test_many_files_one_forest(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """Two copies of a file share every node: counts add up, nodes do not."""
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(EXAMPLE.read_bytes())
    code, out, _ = _run(capsys, str(EXAMPLE), str(copy), "--json", "--format", "claude-code")
    doc = json.loads(out)
    assert code == 0
    assert (doc["messages"], doc["nodes"], len(doc["files"])) == (26, 10, 2)
    assert doc["files"][1]["path"] == str(copy)


def test_mixed_format(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Files of different formats report "mixed" and each file's own detected format."""

    def read_other(path: Path, progress: object) -> ImportResult:
        return ImportResult("anthropic", (), 1, 0, path=str(path))

    fake = Importer("anthropic", read_other, lambda head: head.startswith(b'{"model"'))
    monkeypatch.setitem(FORMATS, "anthropic", fake)
    other = tmp_path / "body.json"
    other.write_text('{"model": "x", "messages": []}')
    code, out, _ = _run(capsys, str(EXAMPLE), str(other), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["format"] == "mixed"
    assert [f["format"] for f in doc["files"]] == ["claude-code", "anthropic"]
    assert (doc["messages"], doc["nodes"]) == (14, 10)


@pytest.mark.parametrize(
    ("content", "argv", "message"),
    [
        (None, [], "input.jsonl: does not exist"),
        ("not json\n", ["--format", "claude-code"], "not a JSON line"),
        ("# just text\n", [], "cannot detect the transcript format"),
    ],
)
def test_bad_input_exit_1(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    content: str | None,
    argv: list[str],
    message: str,
) -> None:
    """A missing file, non-JSON content or an undetectable format: one error line, exit 1."""
    path = tmp_path / "input.jsonl"
    if content is not None:
        path.write_text(content)
    code, out, err = _run(capsys, str(path), *argv)
    assert code == 1 and out == ""
    assert err.startswith("error: ") and message in err and err.count("\n") == 1


def test_unavailable_and_unknown_format(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A known but unregistered format exits 1; a name outside the choices is a usage error."""
    # A copy without letta, swapped in whole: deleting and restoring one key would move it
    # to the end of the registry and change the detection order for later tests.
    without = {name: imp for name, imp in FORMATS.items() if name != "letta"}
    monkeypatch.setattr(transcripts, "FORMATS", without)
    code, _, err = _run(capsys, str(EXAMPLE), "--format", "letta")
    assert code == 1 and err == "error: format 'letta' is not available yet\n"
    code, _, err = _run(capsys, str(EXAMPLE), "--format", "yaml")
    assert code == 2 and "invalid choice" in err


def test_store(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--store writes every node to a SQLite node store; a rerun adds nothing new."""
    from merkle_memory.dag.store import open_store

    db = tmp_path / "nodes.db"
    code, out, err = _run(capsys, str(EXAMPLE), "--store", str(db), "--json")
    assert code == 0 and err == f"stored 10 new nodes in {db}\n"
    assert json.loads(out)["nodes"] == 10
    with open_store(db, create=False) as store:
        assert len(store) == 10
    code, _, err = _run(capsys, str(EXAMPLE), "--store", str(db))
    assert code == 0 and err == f"stored 0 new nodes in {db}\n"


def test_real_inputs_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    """Every Claude Code file of ../shared/real_inputs imports with exit 0."""
    for name in (
        "d-kimuson_claude-code-viewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl",
        "jazzyalex_agent-sessions_claude_small.jsonl",
        "kvsankar_agent-history_claude_forked_session.jsonl",
    ):
        code, out, err = _run(capsys, str(shared_path("real_inputs", name)), "--json")
        assert code == 0 and err == "" and json.loads(out)["format"] == "claude-code"


def test_readme_command_subprocess() -> None:
    """The README's first command works from the repository root in a fresh process."""
    proc = subprocess.run(
        [sys.executable, "-m", "merkle_memory", "dag", "import",
         "examples/claude_code_session.jsonl", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["nodes"] == 10 and doc["files"][0]["path"] == "examples/claude_code_session.jsonl"
    bad = subprocess.run(
        [sys.executable, "-m", "merkle_memory", "dag", "import", "no-such-file.jsonl"],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert (
        bad.returncode == 1 and bad.stderr.startswith("error: ") and "Traceback" not in bad.stderr
    )


# --- subagent and compact-boundary links, end to end (issue 6 item 4) -----------------------

KIMUSON = "d-kimuson_claude-code-viewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"


def _show(capsys: pytest.CaptureFixture[str], node: str, db: Path) -> tuple[str, dict[str, Any]]:
    """``dag show`` as text and as JSON (both exit 0)."""
    assert main(["dag", "show", node, "--store", str(db)]) == 0
    text = capsys.readouterr().out
    assert main(["dag", "show", node, "--store", str(db), "--json"]) == 0
    return text, json.loads(capsys.readouterr().out)


def test_real_sidechain_links_stored_and_shown(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The real session's two inline sidechain roots get their Task tool_use ids in the store,
    and ``dag show`` of a leaf below one prints the link on the root line (text and JSON)."""
    path = shared_path("real_inputs", KIMUSON)
    db = tmp_path / "nodes.db"
    code, out, _ = _run(capsys, str(path), "--store", str(db), "--json")
    doc = json.loads(out)
    assert code == 0 and len(doc["roots"]) == 3
    expected = [None, "toolu_014YF9TXhDRR7BnpasNJ7gjC", "toolu_01LKfUwrsnof18CpWZQcJH44"]
    from merkle_memory.dag.store import open_store

    with open_store(db, create=False) as store:
        stored = [store.get(h) for h in doc["roots"]]
        assert [n.metadata.get("parent_tool_use_id") for n in stored if n] == expected
        # a leaf of the first sidechain: the deepest node whose ancestry ends at roots[1]
        leaf = next(h for h in doc["leaves"] if store.ancestry(h).nodes[-1].hash == doc["roots"][1])
    text, shown = _show(capsys, leaf, db)
    first = text.splitlines()[0]
    assert first.startswith(doc["roots"][1]) and first.endswith(
        "[parent_tool_use_id: toolu_014YF9TXhDRR7BnpasNJ7gjC]"
    )
    assert text.count("parent_tool_use_id") == 1
    assert shown["nodes"][0]["parent_tool_use_id"] == "toolu_014YF9TXhDRR7BnpasNJ7gjC"
    assert [n["parent_tool_use_id"] for n in shown["nodes"][1:]] == [None] * (
        len(shown["nodes"]) - 1
    )


def test_agent_file_and_compact_boundary_linked_through_cli(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A main session (with a compact boundary) and its agent-*.jsonl imported together: the
    agent root shows the Task's tool_use id, the root after the boundary its logical parent;
    node hashes are those of importing each file alone."""
    task = {"type": "tool_use", "id": "toolu_T", "name": "Task", "input": {"prompt": "Look"}}
    result = [{"type": "tool_result", "tool_use_id": "toolu_T", "content": "found"}]
    boundary = {"type": "system", "subtype": "compact_boundary", "uuid": "b1",
                "parentUuid": None, "logicalParentUuid": "a2"}  # fmt: skip
    main_file = tmp_path / "main.jsonl"
    main_file.write_text(
        "\n".join(
            [
                cc_line("u1", None, "user", "find it"),
                cc_line("a1", "u1", "assistant", [task]),
                cc_line("r1", "a1", "user", result, toolUseResult={"agentId": "ag1"}),
                cc_line("a2", "r1", "assistant", "it is found"),
                json.dumps(boundary),
                cc_line("c1", "b1", "user", "Summary: found it", isCompactSummary=True),
            ]
        )
        + "\n"
    )
    agent_file = tmp_path / "agent-ag1.jsonl"
    agent_file.write_text(
        "\n".join(
            [
                cc_line("s1", None, "user", "Look around", isSidechain=True, agentId="ag1"),
                cc_line("s2", "s1", "assistant", "looked", isSidechain=True, agentId="ag1"),
            ]
        )
        + "\n"
    )
    alone = [read_file(main_file).nodes, read_file(agent_file).nodes]
    db = tmp_path / "nodes.db"
    code, out, _ = _run(capsys, str(main_file), str(agent_file), "--store", str(db), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["nodes"] == 7 and len(doc["roots"]) == 3
    main_root, summary_root, agent_root = doc["roots"]
    assert [main_root, summary_root] == [alone[0][0].hash, alone[0][4].hash]
    assert agent_root == alone[1][0].hash

    text, shown = _show(capsys, alone[1][1].hash, db)  # the subagent's answer
    assert (
        text.splitlines()[0]
        == f"{agent_root}  user       Look around  [parent_tool_use_id: toolu_T]"
    )
    assert [n["parent_tool_use_id"] for n in shown["nodes"]] == ["toolu_T", None]

    text, shown = _show(capsys, summary_root, db)
    a2 = alone[0][3].hash
    assert text == f"{summary_root}  user       Summary: found it  [logical_parent: {a2}]\n"
    assert shown["nodes"][0]["logical_parent"] == a2

    # the same files imported one by one carry no links (none can be found across runs)
    db2 = tmp_path / "apart.db"
    for path in (main_file, agent_file):
        assert _run(capsys, str(path), "--store", str(db2))[0] == 0
    text, _ = _show(capsys, agent_root, db2)
    assert "parent_tool_use_id" not in text
