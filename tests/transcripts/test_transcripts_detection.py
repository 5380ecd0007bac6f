"""Format detection reads as much as it needs (issue 14 item 8): a first record far larger than
the first read (``SNIFF_BYTES``, 64 KiB) is still recognised, up to ``SNIFF_LIMIT``.

The files are shaped like real ones: a Claude Code session whose first line is a user turn
with a pasted image (every key Claude Code writes), a Codex rollout whose ``session_meta``
carries long base instructions, an Anthropic request whose first message is a long paste
(its Anthropic signs come after it).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from merkle_memory import transcripts
from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import SNIFF_BYTES, detect_format, import_file

SIZES = {"100KiB": 100 * 1024, "1.5MiB": 3 * 1024 * 1024 // 2}


def claude_code(path: Path, size: int) -> Path:
    image = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * (size * 3 // 4)).decode()
    first = {
        "parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/home/u/p",
        "sessionId": "5eed", "version": "1.0.98", "gitBranch": "main", "type": "user",
        "message": {"role": "user", "content": [
            {"type": "text", "text": "what is in this screenshot?"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": image}}]},
        "uuid": "u1", "timestamp": "2025-09-01T10:00:00.000Z",
    }  # fmt: skip
    reply = {
        "parentUuid": "u1", "isSidechain": False, "type": "assistant", "sessionId": "5eed",
        "message": {"id": "msg_1", "role": "assistant", "model": "claude-opus-4-1",
                    "content": [{"type": "text", "text": "A login form."}]},
        "uuid": "a1", "timestamp": "2025-09-01T10:00:05.000Z",
    }  # fmt: skip
    path.write_text(json.dumps(first) + "\n" + json.dumps(reply) + "\n", encoding="utf-8")
    return path


def codex(path: Path, size: int) -> Path:
    meta = {
        "timestamp": "2025-09-01T10:00:00Z",
        "type": "session_meta",
        "payload": {
            "id": "r1",
            "cwd": "/w",
            "cli_version": "0.30.0",
            "base_instructions": {"text": "You are Codex, a coding agent. " * (size // 31)},
        },
    }
    item = {"timestamp": "2025-09-01T10:00:01Z", "type": "response_item", "payload": {
        "type": "message", "role": "user",
        "content": [{"type": "input_text", "text": "fix the tests"}]}}  # fmt: skip
    path.write_text(json.dumps(meta) + "\n" + json.dumps(item) + "\n", encoding="utf-8")
    return path


def anthropic(path: Path, size: int) -> Path:
    body: dict[str, Any] = {"model": "claude-opus-4-1", "messages": [
        {"role": "user", "content": "please review:\n" + "x = 1\n" * (size // 6)},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "t1", "name": "Read", "input": {"path": "a.py"}}]},
    ], "max_tokens": 1024}  # fmt: skip
    path.write_text(json.dumps(body), encoding="utf-8")
    return path


WRITERS = {"claude-code": claude_code, "codex": codex, "anthropic": anthropic}
NODES = {"claude-code": 2, "codex": 1, "anthropic": 2}
"""Nodes of each file: the two turns (the rollout's session_meta is not a message)."""


@pytest.mark.parametrize("size", SIZES.values(), ids=SIZES.keys())
@pytest.mark.parametrize("name", WRITERS)
def test_first_record_larger_than_the_first_read(tmp_path: Path, name: str, size: int) -> None:
    """The first record alone is larger than SNIFF_BYTES; auto still names the format and
    imports the file exactly as ``--format NAME`` does."""
    path = WRITERS[name](tmp_path / "t.jsonl", size)
    first_line = path.read_bytes().split(b"\n", 1)[0]
    assert len(first_line) > size > SNIFF_BYTES
    assert detect_format(path) == name
    auto, named = import_file(path), import_file(path, name)
    assert auto.format == named.format == name
    assert [n.hash for n in auto.nodes] == [n.hash for n in named.nodes]
    assert len(auto.nodes) == NODES[name]


def test_the_limit_is_documented_and_large() -> None:
    assert SNIFF_BYTES == 64 * 1024
    assert transcripts.SNIFF_LIMIT == 64 * 1024 * 1024


def test_detection_stops_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A first line longer than the cap is not read to its end: detection gives up there."""
    monkeypatch.setattr(transcripts, "SNIFF_LIMIT", 256 * 1024)
    small = claude_code(tmp_path / "small.jsonl", 150 * 1024)
    assert detect_format(small) == "claude-code"
    big = claude_code(tmp_path / "big.jsonl", 300 * 1024)
    with pytest.raises(TranscriptFormatError, match="cannot detect"):
        detect_format(big)
    assert import_file(big, "claude-code").format == "claude-code"


def test_a_cut_body_without_signs_is_not_guessed() -> None:
    """The OpenAI sniffer no longer claims a cut head that shows no OpenAI sign (detection
    reads on instead of guessing, which refused the Anthropic body above)."""
    from merkle_memory.transcripts import openai

    head = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"x" * 100
    assert not openai.sniff(head)
    assert openai.sniff(head + b'"}, {"role": "tool", "tool_call_id": "c", "content": "')
