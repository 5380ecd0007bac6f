"""Anthropic Messages request importer: blocks, splitting tool results, metadata, detection."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from merkle_memory.cli import main
from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import import_file, import_object
from merkle_memory.transcripts.anthropic import looks_like, parse_request, sniff


def req(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "claude-x", "max_tokens": 10, "messages": list(messages), **extra}


def test_system_and_tools_are_metadata_and_cache_control_ignored() -> None:
    """system and tools go to the first node's metadata; cache_control changes nothing."""
    plain = req({"role": "user", "content": [{"type": "text", "text": "hi"}]})
    cached = req(
        {
            "role": "user",
            "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
        },
        system=[{"type": "text", "text": "S1"}, {"type": "text", "text": "S2"}],
        tools=[{"name": "Bash"}],
    )
    a, b = import_object(plain).nodes[0], import_object(cached).nodes[0]
    assert a.hash == b.hash
    assert b.metadata["request"] == {
        "format": "anthropic",
        "model": "claude-x",
        "system": "S1\nS2",
        "tools": ["Bash"],
    }


def test_tool_results_split_from_appended_text() -> None:
    """A user message [tool_result, text] is two nodes: the results, then the text."""
    result = import_object(
        req(
            {"role": "user", "content": "run"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "B", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t", "content": "ok", "is_error": True},
                    {"type": "text", "text": "and now?"},
                ],
            },
        )
    )
    roles = [(n.bucket.role, [b.type for b in n.bucket.content]) for n in result.nodes]
    assert roles == [
        ("user", ["text"]),
        ("assistant", ["tool_use"]),
        ("user", ["tool_result"]),
        ("user", ["text"]),
    ]
    assert result.nodes[2].bucket.content[0].is_error is True


def test_tag_only_message_is_not_a_node() -> None:
    """A message of harness tags only is no node; its child attaches to the kept ancestor."""
    result = import_object(
        req(
            {"role": "user", "content": "<system-reminder>only noise</system-reminder>"},
            {"role": "user", "content": "real"},
            {"role": "assistant", "content": "answer"},
        )
    )
    assert len(result.nodes) == 2 and result.dropped == 1
    assert result.nodes[0].parent_hash is None
    assert result.nodes[1].parent_hash == result.nodes[0].hash


def test_thinking_signature_not_hashed() -> None:
    """Two thinking blocks differing only in signature give the same node."""

    def with_sig(sig: str) -> str:
        return (
            import_object(
                req(
                    {"role": "user", "content": "q"},
                    {
                        "role": "assistant",
                        "content": [{"type": "thinking", "thinking": "hm", "signature": sig}],
                    },
                )
            )
            .nodes[1]
            .hash
        )

    assert with_sig("AAA") == with_sig("BBB")


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("x", "JSON object"),
        ({"messages": 3}, "messages"),
        ({"messages": [{"role": "system", "content": "x"}]}, "unknown role"),
        ({"messages": [{"role": "user", "content": 3}]}, "content"),
        ({"messages": [{"role": "user", "content": [{"text": "no type"}]}]}, "type"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": 1}]}]}, "string"),
    ],
)
def test_bad_bodies(bad: Any, match: str) -> None:
    """Malformed bodies raise TranscriptFormatError."""
    with pytest.raises(TranscriptFormatError, match=match):
        parse_request(bad)


def test_detection_and_cut_head() -> None:
    """looks_like needs Anthropic signs; a cut head is recognised by its block types."""
    assert looks_like(req({"role": "user", "content": "x"}))
    assert not looks_like({"messages": [{"role": "user", "content": "x"}]})
    assert not looks_like({"messages": [{"role": "tool", "content": "x"}], "system": "s"})
    head = json.dumps(
        req(
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "1", "name": "n", "input": {}}],
            }
        )
    ).encode()[:-10]
    assert sniff(head)


def test_cli_file_and_not_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A body file imports with --format anthropic; a non-JSON file exits 1 with 'error:'."""
    good = tmp_path / "b.json"
    good.write_text(json.dumps(req({"role": "user", "content": "x"})))
    assert import_file(good, "anthropic").nodes[0].bucket.provider == "anthropic"
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert main(["dag", "import", str(bad), "--format", "anthropic"]) == 1
    assert capsys.readouterr().err.startswith("error: ")
