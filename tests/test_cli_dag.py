"""Tests of `merkle-memory dag import` (DESIGN section 7)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_path

from merkle_memory import transcripts
from merkle_memory.cli import main
from merkle_memory.transcripts import FORMATS, Importer, ImportResult
from merkle_memory.transcripts.claude_code import read_file

REPO = Path(__file__).resolve().parents[1]
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

    def read_other(path: Path) -> ImportResult:
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
        (None, [], "No such file or directory"),
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
    from merkle_memory.nodestore import open_store

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
