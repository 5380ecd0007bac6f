"""Codex rollout importer: response items, call pairing, merging, metadata, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import detect_format, import_file
from merkle_memory.transcripts.codex import sniff


def write(tmp_path: Path, records: list[Any], tail: str = "\n") -> Path:
    path = tmp_path / "rollout.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + tail)
    return path


def item(payload: dict[str, Any]) -> dict[str, Any]:
    return {"timestamp": "2026-01-01T00:00:00Z", "type": "response_item", "payload": payload}


def msg(role: str, text: str) -> dict[str, Any]:
    kind = "output_text" if role == "assistant" else "input_text"
    return item({"type": "message", "role": role, "content": [{"type": kind, "text": text}]})


def test_reasoning_message_and_call_form_one_assistant_node(tmp_path: Path) -> None:
    """reasoning + message + function_call of one response are one assistant node, in order;
    the reasoning summary is the thinking text and encrypted_content is never hashed."""
    records = [
        {
            "timestamp": "t",
            "type": "session_meta",
            "payload": {"id": "s1", "base_instructions": {"text": "BASE"}},
        },
        msg("user", "hi"),
        item(
            {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "plan"}],
                "encrypted_content": "SECRET",
            }
        ),
        msg("assistant", "doing it"),
        item({"type": "function_call", "name": "sh", "arguments": '{"cmd":"ls"}', "call_id": "c1"}),
        item({"type": "function_call_output", "call_id": "c1", "output": "file"}),
    ]
    result = import_file(write(tmp_path, records))
    assert [n.bucket.role for n in result.nodes] == ["user", "assistant", "user"]
    asst = [b.to_dict() for b in result.nodes[1].bucket.content]
    assert asst == [
        {"type": "thinking", "is_error": False, "thinking": "plan", "thinking_signature": "SECRET"},
        {"type": "text", "is_error": False, "text": "doing it"},
        {
            "type": "tool_use",
            "is_error": False,
            "tool_use_id": "c1",
            "tool_name": "sh",
            "tool_input": {"cmd": "ls"},
        },
    ]
    assert result.nodes[0].metadata["instructions"] == "BASE"
    assert result.nodes[2].bucket.content[0].tool_result_id == "c1"
    assert "unpaired_call_id" not in result.nodes[2].metadata
    assert (result.messages, result.skipped) == (5, 1)


def test_signature_change_keeps_hash(tmp_path: Path) -> None:
    """Two rollouts differing only in encrypted_content give the same node hashes."""

    def run(secret: str) -> list[str]:
        records = [
            msg("user", "q"),
            item({"type": "reasoning", "summary": [], "encrypted_content": secret}),
            msg("assistant", "a"),
        ]
        (tmp_path / secret).mkdir()
        return [n.hash for n in import_file(write(tmp_path / secret, records)).nodes]

    assert run("A") == run("B")


def test_environment_context_turns_hash_equal(tmp_path: Path) -> None:
    """Turns that differ only inside <environment_context> (date, cwd) hash the same."""

    def run(sub: str, date: str) -> list[str]:
        env = (
            f"<environment_context><current_date>{date}</current_date></environment_context>\n\nHey"
        )
        (tmp_path / sub).mkdir()
        return [n.hash for n in import_file(write(tmp_path / sub, [msg("user", env)])).nodes]

    assert run("a", "2026-01-01") == run("b", "2026-02-02")


def test_unpaired_output_and_custom_calls(tmp_path: Path) -> None:
    """An output with no earlier call is kept and flagged; custom_tool_call input is kept raw."""
    records = [
        msg("user", "go"),
        item(
            {
                "type": "custom_tool_call",
                "name": "apply_patch",
                "input": "*** patch",
                "call_id": "k",
            }
        ),
        item({"type": "custom_tool_call_output", "call_id": "k", "output": "done"}),
        item({"type": "function_call_output", "call_id": "ghost", "output": "?"}),
    ]
    result = import_file(write(tmp_path, records))
    assert result.nodes[1].bucket.content[0].tool_input == {"input": "*** patch"}
    assert len(result.nodes[2].bucket.content) == 2  # consecutive outputs: one node
    assert "unpaired_call_id" not in result.nodes[2].metadata  # first output is paired


def test_torn_last_line_skipped_bad_middle_line_refused(tmp_path: Path) -> None:
    """A torn last line (no newline) is skipped; a bad line in the middle is an error."""
    path = write(tmp_path, [msg("user", "q")], tail='\n{"timestamp": "t", "ty')
    assert len(import_file(path).nodes) == 1
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(msg("user", "q")) + "\n{oops\n" + json.dumps(msg("user", "r")) + "\n")
    with pytest.raises(TranscriptFormatError, match=":2: not a JSON line"):
        import_file(bad, "codex")


def test_bad_items(tmp_path: Path) -> None:
    """Items of the wrong shape raise TranscriptFormatError with the line number."""
    for payload, match in (
        ({"type": "message", "role": "robot", "content": []}, "unknown message role"),
        ({"type": "message", "role": "user", "content": 7}, "list of parts"),
        ({"type": "function_call", "name": 3, "call_id": "x"}, "'name' must be a string"),
    ):
        with pytest.raises(TranscriptFormatError, match=match):
            import_file(write(tmp_path, [item(payload)]), "codex")


def test_detection(tmp_path: Path) -> None:
    """A rollout is detected as codex; other JSONL is not."""
    assert detect_format(write(tmp_path, [msg("user", "q")])) == "codex"
    assert not sniff(b'{"type": "user", "message": {}}\n')
