"""Cline importer: task folders and API files, text tool results paired with their calls,
environment details and reminders out of the hash, UI timestamps, noise, hostile input."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import run_main, shared_path

from merkle_memory import canonical
from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import detect_format, import_file, import_object
from merkle_memory.transcripts.cline import sniff, strip_environment_details

SAMPLE = "gmfstu_Online-Card-Architecture_cline_task"
ENV = "<environment_details>\n# VSCode Visible Files\nmain.py\n</environment_details>"
TODO = "\n\n\t\t\t\t# TODO LIST UPDATE REQUIRED - You MUST include the task_progress parameter"

HISTORY: list[dict[str, Any]] = [
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "<task>\nWhat is in /tmp?\n</task>"},
            {"type": "text", "text": ENV},
        ],
    },
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "List it.", "signature": "SIG"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "call_1", "name": "execute_command",
             "input": {"command": "ls /tmp", "requires_approval": False}},
        ],
        "modelInfo": {"modelId": "claude-sonnet-4-5", "providerId": "anthropic"},
        "metrics": {"tokens": {"prompt": 1}},
    },
    {
        "role": "user",
        "content": [
            {"type": "text",
             "text": "[execute_command for 'ls /tmp'] Result:\nCommand executed.\na\nb"},
            {"type": "text", "text": TODO},
            {"type": "text", "text": ENV},
        ],
    },
    {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "call_2", "name": "read_file",
                     "input": {"path": "/tmp/a"}}],
    },
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "[read_file for '/tmp/a'] Result:"},
            {"type": "text", "text": "hello"},
            {"type": "text", "text": "world"},
            {"type": "text", "text": ENV},
        ],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "Two files: a and b."}]},
]  # fmt: skip


def _block(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "is_error": False, **fields}


def reference_hashes() -> list[str]:
    """The chain's ids from hand-written preimages: the task unwrapped, environment details
    and the reminder gone, each result text without its header (DESIGN section 3)."""
    contents = [
        ("user", [_block("text", text="What is in /tmp?")]),
        (
            "assistant",
            [
                _block("thinking", thinking="List it."),
                _block("text", text="Let me look."),
                _block("tool_use", tool_use_id="call_1", tool_name="execute_command",
                       tool_input={"command": "ls /tmp"}),
            ],
        ),
        ("user", [_block("tool_result", tool_result_id="call_1",
                         tool_output="Command executed.\na\nb")]),
        ("assistant", [_block("tool_use", tool_use_id="call_2", tool_name="read_file",
                              tool_input={"path": "/tmp/a"})]),
        ("user", [_block("tool_result", tool_result_id="call_2", tool_output="hello\nworld")]),
        ("assistant", [_block("text", text="Two files: a and b.")]),
    ]  # fmt: skip
    hashes: list[str] = []
    parent = ""
    for role, blocks in contents:
        parent = canonical.digest(
            {"parent": parent, "content": {"type": "message", "role": role, "content": blocks}}
        )
        hashes.append(parent)
    return hashes


def folder(tmp_path: Path, history: Any, ui: Any = None, meta: Any = None) -> Path:
    task = tmp_path / "task"
    task.mkdir(exist_ok=True)
    (task / "api_conversation_history.json").write_text(json.dumps(history))
    if ui is not None:
        (task / "ui_messages.json").write_text(json.dumps(ui))
    if meta is not None:
        (task / "task_metadata.json").write_text(json.dumps(meta))
    return task


def test_history_matches_reference(tmp_path: Path) -> None:
    """Folder, API file and parsed list give the hand-built ids; results pair with their
    calls; the reminder is a note; the model comes from modelInfo."""
    task = folder(tmp_path, HISTORY)
    for source in (task, task / "api_conversation_history.json"):
        result = import_file(source)
        assert result.format == "cline"
        assert [n.hash for n in result.nodes] == reference_hashes()
        assert (result.messages, result.skipped) == (6, 0)
    assert [n.hash for n in import_object(HISTORY).nodes] == reference_hashes()
    nodes = import_file(task).nodes
    assert nodes[1].bucket.model == "claude-sonnet-4-5"
    assert nodes[1].metadata["metrics"] == {"tokens": {"prompt": 1}}
    assert nodes[2].metadata["notes"] == [TODO.strip()]
    assert nodes[1].bucket.content[0].thinking_signature == "SIG"


def test_ui_messages_and_task_metadata_go_to_metadata(tmp_path: Path) -> None:
    """UI entries give each message its timestamp (the first entry of index - 1) and a model
    when the message has none; task_metadata's usage goes to the first node; no hash moves."""
    history = copy.deepcopy(HISTORY)
    del history[1]["modelInfo"]
    ui = [
        {"ts": 1769053680628, "type": "say", "say": "text", "conversationHistoryIndex": -1},
        {"ts": 1769053682591, "type": "say", "say": "reasoning", "conversationHistoryIndex": 0,
         "modelInfo": {"modelId": "claude-opus-4-1"}},
        {"ts": 1769053689455, "type": "say", "say": "text", "conversationHistoryIndex": 0},
        {"ts": "bad", "type": "say", "conversationHistoryIndex": 1},
    ]  # fmt: skip
    meta = {"model_usage": [{"model_id": "m"}], "files_in_context": [{"path": "x"}]}
    nodes = import_file(folder(tmp_path, history, ui, meta)).nodes
    assert [n.hash for n in nodes] == reference_hashes()
    assert nodes[0].metadata["timestamp"] == "2026-01-22T03:48:00.628+00:00"
    assert nodes[1].metadata["timestamp"] == "2026-01-22T03:48:02.591+00:00"
    assert "timestamp" not in nodes[2].metadata
    assert nodes[1].bucket.model == "claude-opus-4-1"
    assert nodes[0].metadata["task"] == {"model_usage": [{"model_id": "m"}]}


def test_environment_details_and_reminders_change_no_id(tmp_path: Path) -> None:
    """More, fewer, or cut-in environment details and reminders: the same ids."""
    noisy = copy.deepcopy(HISTORY)
    for message in noisy:
        if message["role"] == "user":
            message["content"] = [
                {"type": "text", "text": "# task_progress RECOMMENDED\n\nUse a list."},
                *[
                    {**b, "text": b["text"] + "\n" + ENV} if b["text"] != ENV else b
                    for b in message["content"]
                ],
                {"type": "text", "text": ENV + "\n<system-reminder>x</system-reminder>"},
            ]
    assert [n.hash for n in import_object(noisy).nodes] == reference_hashes()
    quiet = copy.deepcopy(HISTORY)
    for message in quiet:
        message["content"] = [b for b in message["content"] if b.get("text") not in (ENV, TODO)]
    assert [n.hash for n in import_object(quiet).nodes] == reference_hashes()


@settings(max_examples=50, deadline=None)
@given(st.text(max_size=30), st.booleans())
def test_strip_environment_details_matches_a_naive_cut(noise: str, closed: bool) -> None:
    """Property: cutting environment details agrees with a naive reference (split on the
    tags), for any text around them, closed or left open."""
    section = "<environment_details>" + noise + ("</environment_details>" if closed else "")
    text = noise + section + noise + section
    expected = noise + (noise if closed else "")
    if not closed or "<environment_details>" in noise:  # the reference: cut tag by tag
        expected = text
        while "<environment_details>" in expected:
            head, _, rest = expected.partition("<environment_details>")
            _, found, tail = rest.partition("</environment_details>")
            expected = head + (tail if found else "")
    assert strip_environment_details(text) == expected


def test_unpaired_result_header_stays_text() -> None:
    """A result header with no tool_use before it (tools written as XML text) stays text."""
    history = [
        {"role": "user", "content": [{"type": "text", "text": "<task>\nhi\n</task>"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "<read_file>x</read_file>"}]},
        {"role": "user", "content": [{"type": "text", "text": "[read_file for 'x'] Result:\n1"}]},
    ]
    node = import_object(history).nodes[2]
    assert [b.to_dict() for b in node.bucket.content] == [
        _block("text", text="[read_file for 'x'] Result:\n1")
    ]


def test_failed_tool_and_other_user_text_and_images(tmp_path: Path) -> None:
    """A failed tool is an error result; user text after a result is the next node; a result
    header whose output follows keeps an image in ``content``; a header naming a tool in
    brackets and quotes is found."""
    history = [
        {"role": "user", "content": "<task>\ngo\n</task>"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "a", "name": "search_files", "input": {"regex": "]"}},
            {"type": "tool_use", "id": "b", "name": "browser_action", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "text", "text": "[search_files for ']' in '.'] Result:\nThe tool execution "
             "failed with the following error:\n<error>bad</error>"},
            {"type": "text", "text": "[browser_action] Result:"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": "QQ"}},
            {"type": "text", "text": ENV},
            {"type": "text", "text": "<feedback>\nstop\n</feedback>"},
        ]},
    ]  # fmt: skip
    nodes = import_object(history).nodes
    assert [n.bucket.role for n in nodes] == ["user", "assistant", "user", "user"]
    results = [b.to_dict() for b in nodes[2].bucket.content]
    assert results == [
        {"type": "tool_result", "is_error": True, "tool_result_id": "a",
         "tool_output": "The tool execution failed with the following error:\n<error>bad</error>"},
        _block("tool_result", tool_result_id="b",
               content=[{"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                     "data": "QQ"}}]),
    ]  # fmt: skip
    assert [b.text for b in nodes[3].bucket.content] == ["<feedback>\nstop\n</feedback>"]


HOSTILE: list[tuple[Any, str]] = [
    ({"messages": []}, "not a cline api history (not a JSON list of messages)"),
    ([3], "not a cline api history ([0] is not an object)"),
    ([{"role": "system", "content": "x"}],
     "not a cline api history ([0] has no role 'user' or 'assistant')"),
    ([{"role": "user", "content": 5}], "cline: [0]: content must be a string or a list"),
    ([{"role": "user", "content": [5]}], "cline: [0]: a content block must be an object"),
    ([{"role": "assistant", "content": [{"type": 1}]}],
     "cline: [0]: a content block needs a string 'type'"),
    ([{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "n",
                                         "input": {"x": float("inf")}}]}],
     "cline: [0]: block field 'tool_input': NaN or infinity is not a JSON number"),
]  # fmt: skip


@pytest.mark.parametrize(("value", "message"), HOSTILE)
def test_hostile_histories_are_clear_errors(tmp_path: Path, value: Any, message: str) -> None:
    """Malformed histories: one TranscriptFormatError naming the API file, never another
    exception."""
    with pytest.raises(TranscriptFormatError) as info:
        import_object(value, "cline")
    assert str(info.value) == message
    task = folder(tmp_path, value)
    api = task / "api_conversation_history.json"
    with pytest.raises(TranscriptFormatError) as info:
        import_file(task, "cline")
    named = message.replace("not a cline", f"{api} is not a cline", 1)
    assert str(info.value) == (named if named != message else f"{api}: {message}")


def test_hostile_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Not JSON, an empty folder, unreadable sidecars: clear errors (sidecars are optional)."""
    task = folder(tmp_path, HISTORY)
    (task / "ui_messages.json").write_bytes(b"\xff{")
    (task / "task_metadata.json").write_text("[1, 2")
    assert [n.hash for n in import_file(task).nodes] == reference_hashes()
    api = task / "api_conversation_history.json"
    api.write_text("[{")
    code, out, err = run_main(capsys, "dag", "import", str(task))
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {api}: not JSON (")
    empty = tmp_path / "empty"
    empty.mkdir()
    code, out, err = run_main(capsys, "dag", "import", str(empty), "--format", "cline")
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and err.count("\n") == 1


def test_detection(tmp_path: Path) -> None:
    """A task folder and its API file are detected; the cut head of a big one too."""
    task = folder(tmp_path, HISTORY)
    assert detect_format(task) == "cline"
    assert detect_format(task / "api_conversation_history.json") == "cline"
    assert detect_format(HISTORY) == "cline"
    big = json.dumps(HISTORY).encode()
    assert sniff(big[:200])
    assert not sniff(b'[{"role": "user", "content": "hi"}]')
    assert not sniff(b'{"messages": []}')


def test_real_task_details() -> None:
    """The real task: every one of its 47 tool calls is answered by one result, no result
    keeps environment details, six nodes carry a TODO reminder note."""
    path = shared_path("real_inputs", SAMPLE)
    nodes = import_file(path).nodes
    uses = [b.tool_use_id for n in nodes for b in n.bucket.content if b.type == "tool_use"]
    results = [b for n in nodes for b in n.bucket.content if b.type == "tool_result"]
    assert len(uses) == 47 and len(results) == 46  # the last call (attempt_completion) is open
    assert [b.tool_result_id for b in results] == uses[:46]
    assert not any("<environment_details>" in b.tool_output for b in results)
    assert sum(1 for n in nodes if "notes" in n.metadata) == 7  # 6 TODO + the first reminder
    assert all("timestamp" in n.metadata for n in nodes)
