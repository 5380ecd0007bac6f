"""OpenAI Chat Completions request importer: block mapping, metadata, detection, errors."""

from __future__ import annotations

from typing import Any

import pytest

from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import detect_format, import_object
from merkle_memory.transcripts.openai import looks_like, parse_request, sniff


def body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": list(messages), **extra}


def blocks(result_node: Any) -> list[dict[str, Any]]:
    return [b.to_dict() for b in result_node.bucket.content]


def test_system_and_developer_are_metadata() -> None:
    """System/developer messages are not nodes; their text, the model and tool names are
    metadata of the first node."""
    result = import_object(
        body(
            {"role": "system", "content": "sys A"},
            {"role": "developer", "content": [{"type": "text", "text": "dev B"}]},
            {"role": "user", "content": "hi"},
            tools=[{"type": "function", "function": {"name": "lookup"}}],
        )
    )
    (node,) = result.nodes
    assert node.bucket.role == "user"
    assert node.metadata["request"] == {
        "format": "openai",
        "model": "gpt-4o",
        "system": "sys A\ndev B",
        "tools": ["lookup"],
    }
    assert result.messages == 3


def test_tool_calls_and_non_object_arguments() -> None:
    """tool_calls become tool_use blocks; arguments that are not a JSON object are kept raw."""
    result = import_object(
        body(
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "f", "arguments": "[1,2]"},
                    },
                    {
                        "id": "c2",
                        "type": "function",
                        "function": {"name": "g", "arguments": "not json"},
                    },
                    {"id": "c3", "type": "function", "function": {"name": "h", "arguments": ""}},
                ],
            },
        )
    )
    assert blocks(result.nodes[1]) == [
        {
            "type": "tool_use",
            "is_error": False,
            "tool_use_id": "c1",
            "tool_name": "f",
            "tool_input": {"arguments": "[1,2]"},
        },
        {
            "type": "tool_use",
            "is_error": False,
            "tool_use_id": "c2",
            "tool_name": "g",
            "tool_input": {"arguments": "not json"},
        },
        {"type": "tool_use", "is_error": False, "tool_use_id": "c3", "tool_name": "h"},
    ]


def test_tool_runs_form_one_node_each() -> None:
    """Consecutive tool messages are one user node; tool messages separated by an assistant
    turn are two nodes."""
    call = {
        "role": "assistant",
        "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }
    result = import_object(
        body(
            {"role": "user", "content": "x"},
            call,
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "content": "2"},
            call,
            {"role": "tool", "tool_call_id": "a", "content": "3"},
        )
    )
    assert [n.bucket.role for n in result.nodes] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]
    assert [b["tool_output"] for b in blocks(result.nodes[2])] == ["1", "2"]
    assert result.nodes[2].metadata["merged"] == 2


def test_image_parts() -> None:
    """image_url parts: a data URL is split into media_type and base64; a URL is kept."""
    result = import_object(
        body(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    {"type": "image_url", "image_url": {"url": "https://x/y.png"}},
                ],
            }
        )
    )
    assert blocks(result.nodes[0])[1:] == [
        {"type": "image", "is_error": False, "image_base64": "AAAA", "media_type": "image/png"},
        {"type": "image", "is_error": False, "image_url": "https://x/y.png"},
    ]


def test_empty_assistant_content_is_no_block() -> None:
    """An assistant "" content with tool calls adds no empty text block (it would be hashed)."""
    result = import_object(
        body(
            {"role": "user", "content": "x"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}}
                ],
            },
        )
    )
    assert [b["type"] for b in blocks(result.nodes[1])] == ["tool_use"]


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ([], "JSON object"),
        ({"model": "x"}, "messages"),
        ({"messages": {}}, "must be a list"),
        ({"messages": [1]}, "not an object"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "unknown role"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "tool_call_id"),
        ({"messages": [{"role": "user", "content": 5}]}, "content"),
        ({"messages": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}, "text"),
        ({"messages": [{"role": "assistant", "tool_calls": [{"function": 1}]}]}, "function"),
    ],
)
def test_bad_bodies_raise_transcript_format_error(bad: Any, match: str) -> None:
    """Malformed bodies raise TranscriptFormatError, never a raw KeyError/TypeError."""
    with pytest.raises(TranscriptFormatError, match=match):
        parse_request(bad)


def test_detection() -> None:
    """OpenAI-only features select openai; a bare user/assistant body is openai too; an
    Anthropic body is not."""
    assert looks_like(body({"role": "system", "content": "s"}, {"role": "user", "content": "u"}))
    assert looks_like(body({"role": "user", "content": "u"}))
    assert not looks_like({"system": "s", "messages": [{"role": "user", "content": "u"}]})
    assert detect_format(body({"role": "tool", "tool_call_id": "a", "content": "x"})) == "openai"
    head = b'{"model": "gpt", "messages": [{"role": "system", "content": "' + b"x" * 100
    assert sniff(head)  # a cut head still shows the system role
    assert not sniff(b"not json at all")


def test_unknown_object_names_formats_tried() -> None:
    """A value of no known shape: one TranscriptFormatError, from import_object."""
    with pytest.raises(TranscriptFormatError, match="cannot detect"):
        import_object({"hello": "world"})
