"""Acceptance: every file of ../shared/real_inputs imports with --format auto, and its DAG shape
(nodes, roots, leaves, branch points) equals a count made by hand.

How the expected counts were made: a throwaway script read each file with the stdlib ``json``
module only (not this library) and applied the DESIGN section 3 rules by hand:

- request bodies and agent files: one node per user/assistant message in order, a run of
  consecutive ``tool`` messages (or Anthropic ``tool_result`` blocks) one node, system/developer
  messages none, a message whose text is only harness tags (``<system-reminder>`` ...) none;
  the conversation is one chain (1 root, 1 leaf);
- the Codex rollout: only ``response_item`` lines, developer messages none, each user message a
  node, each run of assistant-side items (reasoning, message, function_call) one node, each
  run of ``function_call_output`` one node;
- Claude Code: message lines only, assistant lines chained with one ``message.id`` one node,
  tool-result lines answering one assistant turn one node, tag-only lines none (children move
  up), parents through ``parentUuid`` (non-message lines link through), ``parentUuid: null`` a
  root; in the jazzyalex fixture the uuid ``"[trimmed for fixture]"`` names ten different
  lines, so every line naming it as parent starts a root, and roots with equal role and
  projected content are one node (four of those ten collapse).
- the issue-17 samples, each counted by reading the file (the counts are repeated, line by
  line, in the comments of ``EXPECTED``).

Then nodes, roots (no parent), leaves (no child) and branch points (more than one child) were
counted. The shapes were also checked against SOURCES.md (e.g. "3 roots, no branch points" for
d-kimuson, "two leaves" for the forked session).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from support import REPO, shared_path

from merkle_memory.cli import main
from merkle_memory.dag import Forest
from merkle_memory.transcripts import detect_format, import_file

# file -> (format detected, nodes, roots, leaves, branch points), counted by hand (docstring).
EXPECTED = {
    "d-kimuson_claude-code-viewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl": (
        "claude-code",
        40,
        3,
        3,
        0,
    ),
    "jazzyalex_agent-sessions_claude_small.jsonl": ("claude-code", 15, 7, 10, 3),
    "kvsankar_agent-history_claude_forked_session.jsonl": ("claude-code", 14, 1, 2, 1),
    "letta-ai_agent-file_memgpt_agent_with_convo@11b649a.af": ("letta", 85, 1, 1, 0),
    "looplj_axonhub_anthropic-claude-code2.request.json": ("anthropic", 7, 1, 1, 0),
    "madshn_localpush_rollout-2026-02-23T20-34-25-019c8bfe-ec25-79e0-97d7-bda6a9c575ff.jsonl": (
        "codex",
        14,
        1,
        1,
        0,
    ),
    "slow-groovin_ai-api-visualizer_openai.request.json": ("openai", 7, 1, 1, 0),
    # Aider (878 lines): one "# aider chat started at" header (line 2); 12 runs of consecutive
    # "#### " lines (starting at lines 15, 43, 135, 190, 238, 344, 422, 574, 636, 678, 765,
    # 806; 80 lines in all), each followed by assistant text up to the next run: 12 user + 12
    # assistant turns, one chain. The 98 "> " lines are Aider's output (skipped).
    "AbdulAlkawasmeh_metadata-aider.aider.chat.history.md": ("aider", 24, 1, 1, 0),
    # Gemini JSONL (28 lines): line 1 session metadata, 11 "$set" lines, 2 "info" lines (2, 27),
    # 14 message lines for 9 message ids (5 ids written twice, the last copy kept): user
    # (line 4), gemini 52e6 (5 tool calls), gemini a417 (3), gemini cda8 (1), gemini edf9 (1),
    # user (18), gemini 0752 (none), user (22), gemini 42a1 (2). Each user message is a node,
    # each gemini message a node plus one node for the results of its calls (5 of them):
    # 3 + 6 + 5 = 14, one chain.
    "Mai0313_VibeCodingTracker_gemini.jsonl": ("gemini", 14, 1, 1, 0),
    # Gemini JSON: 19 messages, 5 user and 14 gemini; 9 gemini messages (1, 4, 7, 8, 13, 14,
    # 15, 16, 17) carry tool calls (11 in all; message 1 three, each other one), each adding
    # one node for their results: 5 + 14 + 9 = 28, one chain.
    "yoavf_ai-sessions_gemini-cli-pomodoro-timer.json": ("gemini", 28, 1, 1, 0),
    # Cline: api_conversation_history.json has 94 messages alternating user/assistant; every
    # assistant message has one tool_use (47); every user message after the first holds one
    # "[tool ...] Result:" text block (6 with a TODO reminder, all with environment details):
    # each becomes one tool-result node, the first (the <task>) one text node: 94, one chain.
    "gmfstu_Online-Card-Architecture_cline_task": ("cline", 94, 1, 1, 0),
    # Claude Code v2.0.24 (124 lines, 6 file-history-snapshot): one parentUuid chain. Turn 1
    # (lines 1-23): the prompt, 9 assistant messages (lines 2-3 and 5-6 share an id), 8 result
    # lines = 18; turn 2 (25-74): the prompt, 16 assistant messages (thinking + tool_use or
    # text, 56-58 and 63-65 three lines each), 15 results = 32; turn 3 (76-120): the prompt,
    # 15 assistant messages, 14 results = 30; then 3 user lines (122-124, a caveat, a
    # bash-input, a bash-stdout; none only harness tags) = 83.
    "yoavf_ai-sessions_claude-code-pomodoro-timer.jsonl": ("claude-code", 83, 1, 1, 0),
    # Codex CLI 0.47 (153 lines, 63 response_item): the first user message is only an
    # <environment_context> (no node). Turn 1: the prompt (line 3), 8 assistant runs
    # (reasoning and a call), each answered by one output, then reasoning + message =
    # 1 + 9 + 8 = 18; turn 2 (line 68): 1 + 3 + 2 = 6; turn 3 (line 91): 8 answered runs (one,
    # line 103, a call alone) and reasoning + message = 1 + 9 + 8 = 18; 42 in all, one chain.
    "yoavf_ai-sessions_codex-pomodoro-timer.jsonl": ("codex", 42, 1, 1, 0),
}


def test_every_real_input_has_an_expected_count() -> None:
    """Every file of real_inputs (but SOURCES.md) is listed here, and nothing else is."""
    folder = shared_path("real_inputs")
    names = {p.name for p in folder.iterdir() if p.name != "SOURCES.md"}
    assert names == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_input_shape(name: str) -> None:
    """The file is detected as its format and gives the hand-counted DAG shape."""
    path = shared_path("real_inputs", name)
    fmt, nodes, roots, leaves, branch_points = EXPECTED[name]
    assert detect_format(path) == fmt
    result = import_file(path)
    forest = Forest()
    for node in result.nodes:
        forest.add(node)
    shape = (len(forest), len(forest.roots()), len(forest.leaves()), len(forest.branch_points()))
    assert shape == (nodes, roots, leaves, branch_points)
    assert all(node.valid for node in result.nodes)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_input_cli_auto(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """``dag import FILE --format auto --json`` exits 0 with the hand-counted shape."""
    path = shared_path("real_inputs", name)
    fmt, nodes, roots, leaves, branch_points = EXPECTED[name]
    assert main(["dag", "import", str(path), "--format", "auto", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == fmt
    assert doc["nodes"] == nodes
    assert (len(doc["roots"]), len(doc["leaves"]), len(doc["branch_points"])) == (
        roots,
        leaves,
        branch_points,
    )


def test_all_real_inputs_into_one_store(tmp_path: Path) -> None:
    """All files at once (subprocess, --store): exit 0, the store verifies, nodes add up."""
    folder = shared_path("real_inputs")
    files = sorted(str(folder / name) for name in EXPECTED)
    db = tmp_path / "all.db"
    env_cmd = [sys.executable, "-m", "merkle_memory", "dag"]
    done = subprocess.run(
        [*env_cmd, "import", *files, "--store", str(db), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["format"] == "mixed"
    assert doc["nodes"] == sum(v[1] for v in EXPECTED.values())
    check = subprocess.run(
        [*env_cmd, "verify", "--store", str(db), "--json"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert check.returncode == 0, check.stderr
    report = json.loads(check.stdout)
    assert report["ok"] is True
    assert report["nodes"] == doc["nodes"]
    assert report["roots"] == sum(v[2] for v in EXPECTED.values())


# file -> (messages, skipped, skip reasons), counted by hand for the issue-17 samples (see the
# comments of EXPECTED; skipped Claude Code lines are file-history-snapshot lines, skipped
# Codex lines the envelopes that are not response_item: 1 session_meta, 21 turn_context,
# 68 event_msg).
RECORDS = {
    "AbdulAlkawasmeh_metadata-aider.aider.chat.history.md": (24, 98, {"tool output": 98}),
    "Mai0313_VibeCodingTracker_gemini.jsonl": (
        9,
        19,
        {
            "session metadata": 1,
            "$set patch": 11,
            "info message": 2,
            "superseded by a later copy": 5,
        },
    ),
    "yoavf_ai-sessions_gemini-cli-pomodoro-timer.json": (19, 0, {}),
    "gmfstu_Online-Card-Architecture_cline_task": (94, 0, {}),
    "yoavf_ai-sessions_claude-code-pomodoro-timer.jsonl": (118, 6, {}),
    "yoavf_ai-sessions_codex-pomodoro-timer.jsonl": (63, 90, {}),
}


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_new_samples_records_and_reasons(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Messages read, records skipped and the reasons given equal the hand counts; a second
    import gives the same nodes (hashes, parents, metadata) in the same order, and ``dag
    import --json`` prints the same document twice."""
    path = shared_path("real_inputs", name)
    first, second = import_file(path), import_file(path)
    assert (first.messages, first.skipped, dict(first.skip_reasons)) == RECORDS[name]
    assert [n.to_dict() for n in first.nodes] == [n.to_dict() for n in second.nodes]
    outputs = []
    for _ in range(2):
        assert main(["dag", "import", str(path), "--json"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1]
    assert json.loads(outputs[0])["skipped"] == RECORDS[name][1]


REMINDER = "<system-reminder>\nRemember the todo list.\n</system-reminder>"
ENVIRONMENT = "<environment_details>\n# Current Time\nnow\n</environment_details>"


def _noisy_json_lines(text: str, edit: Any) -> str:
    return "".join(json.dumps(edit(json.loads(line))) + "\n" for line in text.splitlines())


def _noisy_claude_code(record: dict[str, Any]) -> dict[str, Any]:
    message = record.get("message")
    if record.get("type") == "user" and isinstance(message, dict):
        content = message["content"]
        if isinstance(content, str):
            message["content"] = REMINDER + content
        else:
            message["content"] = [*content, {"type": "text", "text": REMINDER}]
    return record


def _noisy_codex(record: dict[str, Any]) -> dict[str, Any]:
    payload = record.get("payload")
    if isinstance(payload, dict) and payload.get("role") == "user":
        payload["content"].append({"type": "input_text", "text": ENVIRONMENT.replace(
            "environment_details", "environment_context")})  # fmt: skip
    return record


def _noisy_gemini_message(message: dict[str, Any]) -> dict[str, Any]:
    if message.get("type") == "user" and isinstance(message.get("content"), str):
        message["content"] = message["content"] + REMINDER
    elif message.get("type") == "user":
        message["content"] = [*message["content"], {"text": REMINDER}]
    return message


def _noise(name: str, source: Path, target: Path) -> Path:
    """A copy of a sample with harness noise added: reminders in user text, environment
    details, notices, Aider output lines."""
    if source.is_dir():
        history = json.loads((source / "api_conversation_history.json").read_text())
        for message in history:
            if message["role"] == "user":
                message["content"].insert(0, {"type": "text", "text": ENVIRONMENT})
                message["content"].append({"type": "text", "text": REMINDER + ENVIRONMENT})
        target.mkdir()
        (target / "api_conversation_history.json").write_text(json.dumps(history))
        return target
    text = source.read_text(encoding="utf-8")
    if name.endswith(".md"):
        noisy = text.replace("\n\n#### ", "\n> Added a file to the chat  \n\n#### ")
    elif "claude-code" in name:
        noisy = _noisy_json_lines(text, _noisy_claude_code)
    elif "codex" in name:
        noisy = _noisy_json_lines(text, _noisy_codex)
    elif name.endswith(".jsonl"):  # Gemini, line form
        notice = json.dumps({"id": "n", "type": "warning", "content": "Slow"}) + "\n"
        noisy = _noisy_json_lines(text, _noisy_gemini_message).replace("\n", "\n" + notice, 3)
    else:  # Gemini, JSON form
        session = json.loads(text)
        messages = [_noisy_gemini_message(m) for m in session["messages"]]
        session["messages"] = [
            item for m in messages for item in ({"id": "i", "type": "info", "content": "x"}, m)
        ]
        noisy = json.dumps(session)
    target.write_text(noisy, encoding="utf-8")
    return target


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_harness_noise_changes_no_id(name: str, tmp_path: Path) -> None:
    """Each issue-17 sample with ``<system-reminder>`` / environment noise, notices or Aider
    output lines added gives exactly the same node ids."""
    source = shared_path("real_inputs", name)
    noisy = _noise(name, source, tmp_path / name)
    assert source.read_bytes() != noisy.read_bytes() if noisy.is_file() else True
    assert [n.hash for n in import_file(noisy).nodes] == [n.hash for n in import_file(source).nodes]
