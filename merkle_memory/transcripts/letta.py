"""Importer for Letta (MemGPT) agent files (``.af``); their core memory as ledger records.

An agent file is one JSON object: the agent's configuration, its ``messages`` (OpenAI-style:
``role``, ``content`` parts, ``tool_calls[].function.{name, arguments}``, ``tool_call_id``),
and its core memory blocks (``core_memory``, or ``blocks`` / ``memory.blocks`` in later
schema versions).

Messages, in file order, form one chain (DESIGN section 3, common importer rules):

- ``user`` and ``assistant`` messages are nodes; text parts become ``text`` blocks (Letta's
  user turns are JSON text such as ``{"type": "user_message", ...}``, kept as the model saw
  them); an assistant's ``tool_calls`` become ``tool_use`` blocks after its text (its inner
  monologue), arguments parsed as in the OpenAI importer.
- ``tool`` messages become ``tool_result`` blocks (``tool_result_id`` = ``tool_call_id``; when
  the content is empty, the ``tool_returns`` text); a run of tool messages is one ``user``
  node, even with a ``system`` message between them.
- ``system`` messages (Letta rebuilds its system prompt after each memory edit) are metadata,
  not nodes: their text goes into the ``system`` metadata of the next node.

The importer (:data:`IMPORTER`, :func:`read_file`, :func:`read_object`) returns conversation
data only. Apart from it, :func:`core_memory_records` exports the core memory blocks as memory
records that a ledger can seal (DESIGN section 4; mnemo's sealed fields ``id, session_id,
agent_id, summary, key_facts, decisions_made, projects_referenced, timestamp``), for a caller
of the importer that wants them; no importer path calls it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from .. import canonical
from .._json import json_copy
from ..dag import ContentBlock
from ..errors import MerkleMemoryError, TranscriptFormatError
from ._chain import TOOL_RESULTS, Turn, chain, need, other_part, part_blocks
from ._common import RawMessage, tool_arguments, tool_result_block
from ._importer import Importer
from ._located import located
from ._sniff import AGENT_KEYS, agent_key, head_text, head_value
from .openai import image_block

__all__ = [
    "FORMAT",
    "IMPORTER",
    "core_memory_records",
    "looks_like",
    "parse_agent",
    "read_file",
    "read_object",
    "shape_problem",
    "sniff",
]

FORMAT: Final = "letta"
_SLUG: Final = re.compile(r"[^A-Za-z0-9_-]+")


def _part_block(kind: str, part: Mapping[str, Any], where: str) -> ContentBlock:
    if kind == "image_url" and isinstance(part.get("image_url"), Mapping):
        return image_block(part["image_url"].get("url"), where)
    if kind == "reasoning" and isinstance(part.get("reasoning"), str):
        return ContentBlock("thinking", thinking=part["reasoning"])
    return other_part(kind, part)


def _blocks(content: Any, where: str) -> list[ContentBlock]:
    return part_blocks(content, where, _part_block)


def _calls(calls: Any, where: str) -> Iterator[ContentBlock]:
    need(isinstance(calls, list), f"{where}: tool_calls must be a list")
    for call in calls:
        need(isinstance(call, Mapping), f"{where}: a tool call must be an object")
        function = call.get("function")
        need(isinstance(function, Mapping), f"{where}: a tool call needs a function object")
        call_id = call.get("id") or ""
        name = function.get("name") or ""
        need(isinstance(call_id, str) and isinstance(name, str), f"{where}: bad tool call")
        yield ContentBlock(
            "tool_use",
            tool_use_id=call_id,
            tool_name=name,
            tool_input=tool_arguments(function.get("arguments")),
        )


def _tool_output(message: Mapping[str, Any], where: str) -> Any:
    content = message.get("content")
    texts = [b.text for b in _blocks(content, where) if b.text]
    if texts or not message.get("tool_returns"):
        return content if isinstance(content, str) else "\n".join(texts)
    returns = message["tool_returns"]
    if isinstance(returns, list):
        parts = [
            r.get("func_response") or r.get("tool_return")
            for r in returns
            if isinstance(r, Mapping)
        ]
        return "\n".join(p for p in parts if isinstance(p, str))
    return ""


def _turn(index: int, message: Any, system: list[str]) -> Turn | None:
    """The turn of ``messages[index]``, or ``None`` for a system message (whose text is added
    to ``system``, and ``system`` emptied into the next turn's metadata)."""
    where = f"letta: messages[{index}]"
    need(isinstance(message, Mapping), f"{where} is not an object")
    role = message.get("role")
    if role == "system":
        system.extend(b.text for b in _blocks(message.get("content"), where) if b.text)
        return None
    if role not in ("user", "assistant", "tool"):
        raise TranscriptFormatError(f"{where}: unknown role {role!r}")
    metadata: dict[str, Any] = {"source": FORMAT, "index": index}
    for key in ("created_at", "name", "id"):
        if isinstance(message.get(key), str):
            metadata[key] = message[key]
    if system:
        metadata["system"] = "\n".join(system)
        system.clear()
    json_copy(metadata, "metadata", TranscriptFormatError)  # a bad string is named here
    model = message.get("model") if isinstance(message.get("model"), str) else None
    if role == "tool":
        call_id = message.get("tool_call_id")
        need(isinstance(call_id, str), f"{where}: a tool message needs a tool_call_id")
        block = tool_result_block(call_id, _tool_output(message, where))
        return Turn("user", [block], metadata, merge=TOOL_RESULTS, model=model)
    blocks = _blocks(message.get("content"), where)
    if role == "assistant" and message.get("tool_calls"):
        blocks.extend(_calls(message["tool_calls"], where))
    return Turn(str(role), blocks, metadata, model=model)


def _turns(messages: Any) -> Iterator[Turn]:
    need(isinstance(messages, list), "letta: 'messages' must be a list")
    system: list[str] = []
    for index, message in enumerate(messages):
        with located(f"letta: messages[{index}]"):
            turn = _turn(index, message, system)
        if turn is not None:
            yield turn


def _agent_name(agent: Mapping[str, Any]) -> str | None:
    name = agent.get("name")
    return name if isinstance(name, str) and name else None


def shape_problem(value: Any) -> str | None:
    """Why a parsed value is not a Letta agent file, or ``None`` if it is one: the same
    signature as :func:`looks_like` (an object with a ``messages`` list and one of
    ``core_memory``, ``in_context_message_indices``, ``agent_type``, ``llm_config``), checked
    by an explicit ``--format letta``. Never raises."""
    if not isinstance(value, Mapping):
        return "not a JSON object"
    if not isinstance(value.get("messages"), list):
        return "no 'messages' list"
    if agent_key(value) is None:
        return f"none of the agent keys {', '.join(AGENT_KEYS)}"
    return None


def parse_agent(agent: Any) -> list[RawMessage]:
    """Read the messages of an agent file into a chain of RawMessages (module docstring).

    Args:
        agent: the parsed agent file, whose shape :func:`shape_problem` accepts.

    Returns:
        One record per node-to-be (keys ``"0"``, ``"1"``, ...), for
        :func:`~merkle_memory.transcripts.build_nodes`. Conversation data only: the core
        memory blocks are not read (see :func:`core_memory_records`).

    Raises:
        TranscriptFormatError: a message that cannot be read (``letta: messages[INDEX]:
            ...``).
    """
    turns = list(_turns(agent["messages"]))
    llm = agent.get("llm_config")
    provider = llm.get("model_endpoint_type") if isinstance(llm, Mapping) else None
    request: dict[str, Any] = {"format": FORMAT}
    if isinstance(agent.get("system"), str):
        request["system"] = agent["system"]
    return list(
        chain(
            turns,
            provider=provider if isinstance(provider, str) else None,
            agent_name=_agent_name(agent),
            first_metadata={"agent": request},
        )
    )


def _memory_blocks(agent: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    for holder in (agent, agent.get("memory")):
        if not isinstance(holder, Mapping):
            continue
        for key in ("core_memory", "blocks"):
            blocks = holder.get(key)
            if isinstance(blocks, list):
                return [b for b in blocks if isinstance(b, Mapping)]
    return []


def core_memory_records(agent: Any, session_id: str | None = None) -> list[dict[str, Any]]:
    """The agent's core memory blocks as memory records a ledger can seal (DESIGN section 4).

    One record per block that has a string ``label`` and ``value``, in file order::

        {"id": "letta-<agent>-<label>-<16 hex>",  # content-addressed: a new value, a new id
         "session_id": session_id, "agent_id": <agent id or name>, "summary": <value>,
         "key_facts": [], "decisions_made": [], "projects_referenced": [],
         "timestamp": <block updated_at or created_at, or null>,
         # filing fields (not sealed):
         "source": "letta", "label": <label>, "limit": <limit or null>, "block_id": <id or null>}

    The 16 hex digits are the start of ``digest({"agent_id", "label", "value"})``, so every
    version of a block (after a ``core_memory_replace``/``append``) is a record of its own and
    sealing a newer export never rewrites a sealed one. Names are reduced to
    ``[A-Za-z0-9_-]`` in the id, which stays a valid record file name.

    Args:
        agent: the parsed agent file.
        session_id: the ``session_id`` to seal into each record (``None``: null).

    Raises:
        TranscriptFormatError: ``agent`` is not an object, or a block value outside the
            canonical JSON domain.
    """
    need(isinstance(agent, Mapping), "letta: an agent file must be a JSON object")
    agent_id = agent.get("id") if isinstance(agent.get("id"), str) else _agent_name(agent)
    slug = _SLUG.sub("-", agent_id or "agent").strip("-")[:48] or "agent"
    records: list[dict[str, Any]] = []
    for block in _memory_blocks(agent):
        label, value = block.get("label"), block.get("value")
        if not isinstance(label, str) or not isinstance(value, str):
            continue
        try:
            tag = canonical.digest({"agent_id": agent_id, "label": label, "value": value})
        except MerkleMemoryError as exc:
            raise TranscriptFormatError(f"letta: memory block {label!r}: {exc}") from exc
        stamp = block.get("updated_at") or block.get("created_at")
        label_slug = _SLUG.sub("-", label).strip("-")[:48] or "block"
        records.append(
            {
                "id": f"letta-{slug}-{label_slug}-{tag[:16]}",
                "session_id": session_id,
                "agent_id": agent_id,
                "summary": value,
                "key_facts": [],
                "decisions_made": [],
                "projects_referenced": [],
                "timestamp": stamp if isinstance(stamp, str) else None,
                "source": FORMAT,
                "label": label,
                "limit": block.get("limit") if isinstance(block.get("limit"), int) else None,
                "block_id": block.get("id") if isinstance(block.get("id"), str) else None,
            }
        )
    return records


def looks_like(value: Any) -> bool:
    """Whether a parsed JSON value looks like a Letta agent file: an object with a
    ``messages`` list and one of ``core_memory``, ``in_context_message_indices``,
    ``agent_type``, ``llm_config``. Never raises."""
    return (
        isinstance(value, Mapping)
        and isinstance(value.get("messages"), list)
        and any(key in value for key in AGENT_KEYS)
    )


def sniff(head: bytes) -> bool:
    """Whether a file's first bytes look like an agent file (whole or cut at the head)."""
    value = head_value(head)
    if value is not None:
        return looks_like(value)
    text = head_text(head)
    return text.lstrip("\ufeff \t\r\n").startswith("{") and any(
        f'"{key}"' in text for key in AGENT_KEYS
    )


IMPORTER: Final = Importer.for_document(
    FORMAT, "a letta agent file", parse_agent, shape_problem, sniff, looks_like
)
"""The registry entry of this format."""

read_file: Final = IMPORTER.read_file
"""Import an agent file (``.af``, JSON; :meth:`Importer.read_file`): raises
``TranscriptFormatError`` naming the file for content that is not JSON, not an agent file
(``FILE is not a letta agent file (...)``) or a message that cannot be read; ``OSError`` for
an unreadable file. Conversation data only (see :func:`core_memory_records`)."""

read_object: Final = IMPORTER.read_object
"""Import a parsed agent file (:meth:`Importer.read_object`): raises
``TranscriptFormatError`` for a value that is not an agent file (:func:`shape_problem`:
``not a letta agent file (...)``) or a message that cannot be read (``letta:
messages[INDEX]: ...``)."""
