"""Letta agent file importer and the export of core memory blocks as ledger records."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from support import shared_path

from merkle_memory import canonical
from merkle_memory.errors import TranscriptFormatError
from merkle_memory.ledger import records as ledger_records
from merkle_memory.transcripts import detect_format, import_object
from merkle_memory.transcripts.letta import core_memory_records, looks_like


def text(value: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": value}]


AGENT: dict[str, Any] = {
    "agent_type": "memgpt_agent",
    "name": "memgpt agent",
    "llm_config": {"model_endpoint_type": "openai"},
    "core_memory": [
        {
            "label": "persona",
            "value": "I am Sam.",
            "limit": 5000,
            "updated_at": "2025-04-01T03:52:02",
        },
        {"label": "human", "value": "First name: Robin", "limit": 5000},
    ],
    "messages": [
        {"role": "system", "content": text("SYSTEM v1"), "tool_calls": [], "tool_call_id": None},
        {
            "role": "user",
            "content": text('{"type": "user_message", "message": "hi"}'),
            "tool_calls": [],
            "tool_call_id": None,
        },
        {
            "role": "assistant",
            "content": text("Greet the user."),
            "model": "gpt-4",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "send_message", "arguments": '{"message": "Hello!"}'},
                }
            ],
            "tool_call_id": None,
        },
        {"role": "system", "content": text("SYSTEM v2"), "tool_calls": [], "tool_call_id": None},
        {
            "role": "tool",
            "content": text('{"status": "OK"}'),
            "tool_calls": [],
            "tool_call_id": "c1",
        },
    ],
}


def test_messages_to_nodes() -> None:
    """System messages are metadata; assistant text + tool_calls one node; tool a user node."""
    result = import_object(AGENT)
    assert result.format == "letta"
    assert [n.bucket.role for n in result.nodes] == ["user", "assistant", "user"]
    assert [b.type for b in result.nodes[1].bucket.content] == ["text", "tool_use"]
    assert result.nodes[1].bucket.content[1].tool_input == {"message": "Hello!"}
    assert result.nodes[2].bucket.content[0].tool_result_id == "c1"
    assert result.nodes[0].metadata["system"] == "SYSTEM v1"
    assert result.nodes[2].metadata["system"] == "SYSTEM v2"
    assert result.nodes[1].bucket.agent_name == "memgpt agent"
    assert result.nodes[1].bucket.provider == "openai"
    assert result.messages == 5


def test_core_memory_records_can_be_sealed() -> None:
    """Each core memory block is a record with mnemo's sealed fields, a valid id, and a
    testimony; a changed value gives a new id."""
    records = core_memory_records(AGENT, session_id="s-9")
    assert [r["label"] for r in records] == ["persona", "human"]
    first = records[0]
    assert set(ledger_records.DEFAULT_SEALED_FIELDS) <= set(first)
    assert first["summary"] == "I am Sam."
    assert first["agent_id"] == "memgpt agent"
    assert first["session_id"] == "s-9"
    assert first["timestamp"] == "2025-04-01T03:52:02"
    tag = canonical.digest({"agent_id": "memgpt agent", "label": "persona", "value": "I am Sam."})
    assert first["id"] == f"letta-memgpt-agent-persona-{tag[:16]}"
    for record in records:
        ledger_records.validate_record_id(record["id"])
        assert len(ledger_records.testimony(record)) == 64
    edited = copy.deepcopy(AGENT)
    edited["core_memory"][0]["value"] = "I am Chad."
    assert core_memory_records(edited)[0]["id"] != first["id"]


def test_real_agent_file_records() -> None:
    """The real agent file exports its two blocks (persona, human) as records."""
    import json

    agent = json.loads(
        shared_path(
            "real_inputs", "letta-ai_agent-file_memgpt_agent_with_convo@11b649a.af"
        ).read_text()
    )
    records = core_memory_records(agent)
    assert [r["label"] for r in records] == ["persona", "human"]
    assert "Sailing partner: Jean-Luc" in records[1]["summary"]


def test_detection_and_errors() -> None:
    """Agent-file keys select letta before openai; bad shapes raise TranscriptFormatError."""
    assert detect_format(AGENT) == "letta"
    assert not looks_like({"messages": []})
    with pytest.raises(TranscriptFormatError):
        import_object({"agent_type": "x", "messages": [{"role": "wizard"}]}, "letta")
    with pytest.raises(TranscriptFormatError):
        import_object({"agent_type": "x", "messages": [{"role": "tool", "content": "x"}]}, "letta")
    with pytest.raises(TranscriptFormatError):
        core_memory_records([1, 2])
