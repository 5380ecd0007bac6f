"""Identity across formats (issue 6 item 2, issue 17): one conversation, the same node ids from
an Anthropic request, an OpenAI request, a Codex rollout, a Claude Code session, a Gemini CLI
session and a Cline history; a request re-sent one turn later adds exactly one node."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from merkle_memory import canonical
from merkle_memory.transcripts import import_file, import_object

ANTHROPIC: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 1024,
    "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    "tools": [{"name": "Bash", "input_schema": {}}, {"name": "Read", "input_schema": {}}],
    "messages": [
        {"role": "user", "content": "What is in /tmp?"},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {
                    "type": "tool_use",
                    "id": "call_1",
                    "name": "Bash",
                    "input": {"command": "ls /tmp", "timeout": 0},
                },
                {"type": "tool_use", "id": "call_2", "name": "Read", "input": {"path": "/tmp/a"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_1", "content": "a\nb"},
                {
                    "type": "tool_result",
                    "tool_use_id": "call_2",
                    "content": [
                        {"type": "text", "text": "hello"},
                        {"type": "text", "text": "world"},
                    ],
                    "cache_control": {"type": "ephemeral"},
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Two files: a and b."}]},
    ],
}

OPENAI: dict[str, Any] = {
    "model": "gpt-4o",
    "messages": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is in /tmp?"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "Bash",
                        "arguments": '{"command": "ls /tmp", "timeout": 0}',
                    },
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "Read", "arguments": '{"path":"/tmp/a"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "a\nb"},
        {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": [{"type": "text", "text": "hello"}, {"type": "text", "text": "world"}],
        },
        {"role": "assistant", "content": "Two files: a and b."},
    ],
}


def _block(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "is_error": False, **fields}


def reference_hashes() -> list[str]:
    """Naive reference: the chain's node hashes from hand-written preimages (DESIGN section 3),
    with the projection done by hand (``timeout: 0`` pruned)."""
    contents = [
        ("user", [_block("text", text="What is in /tmp?")]),
        (
            "assistant",
            [
                _block("text", text="Let me look."),
                _block(
                    "tool_use",
                    tool_use_id="call_1",
                    tool_name="Bash",
                    tool_input={"command": "ls /tmp"},
                ),
                _block(
                    "tool_use",
                    tool_use_id="call_2",
                    tool_name="Read",
                    tool_input={"path": "/tmp/a"},
                ),
            ],
        ),
        (
            "user",
            [
                _block("tool_result", tool_result_id="call_1", tool_output="a\nb"),
                _block("tool_result", tool_result_id="call_2", tool_output="hello\nworld"),
            ],
        ),
        ("assistant", [_block("text", text="Two files: a and b.")]),
    ]
    hashes: list[str] = []
    parent = ""
    for role, blocks in contents:
        parent = canonical.digest(
            {"parent": parent, "content": {"type": "message", "role": role, "content": blocks}}
        )
        hashes.append(parent)
    return hashes


def test_anthropic_matches_reference() -> None:
    """The Anthropic request gives exactly the hand-computed chain of node hashes."""
    result = import_object(ANTHROPIC)
    assert result.format == "anthropic"
    assert [n.hash for n in result.nodes] == reference_hashes()


def test_openai_matches_anthropic() -> None:
    """The same conversation as an OpenAI request gives the same node hashes, tool calls and
    results included (arguments parsed from JSON text, parallel results one node)."""
    result = import_object(OPENAI)
    assert result.format == "openai"
    assert [n.hash for n in result.nodes] == reference_hashes()


def test_resend_adds_exactly_one_node() -> None:
    """A request re-sent one turn later (history plus one message) adds exactly one node,
    whose parent is the previous leaf."""
    for body, follow_up in (
        (ANTHROPIC, {"role": "user", "content": "Thanks!"}),
        (OPENAI, {"role": "user", "content": "Thanks!"}),
    ):
        before = import_object(body).nodes
        later = copy.deepcopy(body)
        later["messages"].append(follow_up)
        after = import_object(later).nodes
        new = {n.hash for n in after} - {n.hash for n in before}
        assert len(new) == 1
        (added,) = [n for n in after if n.hash in new]
        assert added.parent_hash == before[-1].hash


def test_is_error_is_hashed() -> None:
    """An Anthropic tool result marked is_error differs from the same result without the flag
    (OpenAI tool messages carry no error flag, so only unflagged results can match)."""
    flagged = copy.deepcopy(ANTHROPIC)
    flagged["messages"][2]["content"][0]["is_error"] = True
    hashes = [n.hash for n in import_object(flagged).nodes]
    assert hashes[:2] == reference_hashes()[:2]
    assert hashes[2] != reference_hashes()[2]


def _cc_line(uuid: str, parent: str | None, kind: str, message: dict[str, Any]) -> str:
    return json.dumps(
        {
            "parentUuid": parent,
            "isSidechain": False,
            "sessionId": "s-1",
            "type": kind,
            "message": message,
            "uuid": uuid,
            "timestamp": "2026-01-01T00:00:00Z",
        }
    )


def test_claude_code_session_matches_request(tmp_path: Path) -> None:
    """A Claude Code session of the same turns (assistant split over lines of one message.id,
    one line per parallel tool result, noise lines) gives the same nodes as the request."""
    msg = {"id": "msg_1", "role": "assistant", "model": "claude-sonnet-4-5"}
    blocks = ANTHROPIC["messages"][1]["content"]
    results = ANTHROPIC["messages"][2]["content"]
    lines = [
        json.dumps({"type": "file-history-snapshot", "messageId": "x", "snapshot": {}}),
        _cc_line("u1", None, "user", {"role": "user", "content": "What is in /tmp?"}),
        _cc_line("a1", "u1", "assistant", {**msg, "content": [blocks[0]]}),
        _cc_line("a2", "a1", "assistant", {**msg, "content": [blocks[1]]}),
        _cc_line("a3", "a2", "assistant", {**msg, "content": [blocks[2]]}),
        _cc_line("r1", "a3", "user", {"role": "user", "content": [results[0]]}),
        _cc_line("r2", "r1", "user", {"role": "user", "content": [results[1]]}),
        _cc_line(
            "a4",
            "r2",
            "assistant",
            {"id": "msg_2", "role": "assistant", "content": "Two files: a and b."},
        ),
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = import_file(path)
    assert result.format == "claude-code"
    assert [n.hash for n in result.nodes] == reference_hashes()


def test_codex_rollout_matches_request(tmp_path: Path) -> None:
    """A Codex rollout of the same turns (separate response items, developer message and
    environment context) gives the same node hashes."""

    def item(payload: dict[str, Any]) -> str:
        return json.dumps({"timestamp": "t", "type": "response_item", "payload": payload})

    def text(role: str, kind: str, value: str) -> dict[str, Any]:
        return {"type": "message", "role": role, "content": [{"type": kind, "text": value}]}

    lines = [
        json.dumps({"timestamp": "t", "type": "session_meta", "payload": {"id": "s"}}),
        item(text("developer", "input_text", "You are terse.")),
        item(
            text(
                "user", "input_text", "<environment_context>\n<cwd>/x</cwd>\n</environment_context>"
            )
        ),
        json.dumps({"timestamp": "t", "type": "turn_context", "payload": {"model": "gpt-5"}}),
        item(text("user", "input_text", "What is in /tmp?")),
        item(text("assistant", "output_text", "Let me look.")),
        item(
            {
                "type": "function_call",
                "name": "Bash",
                "call_id": "call_1",
                "arguments": '{"command":"ls /tmp","timeout":0}',
            }
        ),
        item(
            {
                "type": "function_call",
                "name": "Read",
                "call_id": "call_2",
                "arguments": '{"path":"/tmp/a"}',
            }
        ),
        json.dumps({"timestamp": "t", "type": "event_msg", "payload": {"type": "token_count"}}),
        item({"type": "function_call_output", "call_id": "call_1", "output": "a\nb"}),
        item(
            {
                "type": "function_call_output",
                "call_id": "call_2",
                "output": [
                    {"type": "input_text", "text": "hello"},
                    {"type": "input_text", "text": "world"},
                ],
            }
        ),
        item(text("assistant", "output_text", "Two files: a and b.")),
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = import_file(path)
    assert result.format == "codex"
    assert [n.hash for n in result.nodes] == reference_hashes()
    assert result.nodes[1].bucket.model == "gpt-5"


def test_gemini_session_matches_request(tmp_path: Path) -> None:
    """A Gemini CLI session of the same turns (calls and their results inside one gemini
    message, a result split over a response and a text part, notices) gives the same ids, in
    both its JSON and JSONL forms."""
    calls = [
        {
            "id": "call_1",
            "name": "Bash",
            "args": {"command": "ls /tmp", "timeout": 0},
            "result": [{"functionResponse": {"id": "call_1", "response": {"output": "a\nb"}}}],
        },
        {
            "id": "call_2",
            "name": "Read",
            "args": {"path": "/tmp/a"},
            "result": [
                {"functionResponse": {"id": "call_2", "response": {"output": "hello"}}},
                {"text": "world"},
            ],
        },
    ]
    messages = [
        {"id": "1", "type": "user", "content": "What is in /tmp?"},
        {"id": "2", "type": "info", "content": "Authenticated."},
        {"id": "3", "type": "gemini", "content": "Let me look.", "toolCalls": calls},
        {"id": "4", "type": "gemini", "content": [{"text": "Two files: a and b."}]},
    ]
    session = {"sessionId": "s", "projectHash": "p", "messages": messages}
    assert [n.hash for n in import_object(session).nodes] == reference_hashes()
    path = tmp_path / "session.jsonl"
    lines = [{"sessionId": "s", "projectHash": "p"}, *messages]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert [n.hash for n in import_file(path).nodes] == reference_hashes()


def test_cline_history_matches_request() -> None:
    """A Cline history of the same turns (the task wrapped in ``<task>``, results as text
    blocks with their headers, environment details) gives the same ids."""
    env = {"type": "text", "text": "<environment_details>\n# Open Tabs\na\n</environment_details>"}
    history = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "<task>\nWhat is in /tmp?\n</task>"}, env],
        },
        copy.deepcopy(ANTHROPIC["messages"][1]),
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[Bash for 'ls /tmp'] Result:\na\nb"},
                {"type": "text", "text": "[Read for '/tmp/a'] Result:"},
                {"type": "text", "text": "hello"},
                {"type": "text", "text": "world"},
                env,
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Two files: a and b."}]},
    ]
    result = import_object(history)
    assert result.format == "cline"
    assert [n.hash for n in result.nodes] == reference_hashes()
