"""Private: logical links between Claude Code conversations that the DAG keeps apart.

A subagent conversation (inline ``isSidechain`` lines, or an ``agent-*.jsonl`` file) is its
own root, as the API saw it, and so is the conversation after a compact boundary
(``parentUuid: null``). Their link to the turn that caused them is not part of any hash, but it
is worth keeping: :func:`link_sessions` adds it to the metadata of the root node (DESIGN
section 3, issue 6 item 4):

- ``parent_tool_use_id``: the id of the ``Task`` (or ``Agent``) ``tool_use`` that started a
  subagent. Found by the ``agentId`` the subagent's lines carry and the Task result's
  ``toolUseResult.agentId`` names, or else by the subagent's first prompt being exactly the
  Task's ``input.prompt`` (a prompt that several Task calls share links to none of them).
- ``logical_parent`` (64-char hex) and ``logical_parent_uuid``: for the first node after a
  ``compact_boundary`` line, the node holding the boundary's ``logicalParentUuid`` line (or
  that line's nearest message ancestor).

Only files imported together are linked; the raw lines are read again (streaming) for the
fields the importer does not keep.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from ..dag import Node
from ..errors import TranscriptFormatError
from ._common import ImportResult, open_regular

__all__ = ["link_sessions"]

_TASK_TOOLS: Final = frozenset({"Task", "Agent"})
_AMBIGUOUS: Final = ""


def _lines(path: str) -> Iterator[Mapping[str, Any]]:
    try:
        with open_regular(path) as handle:
            for raw in handle:
                try:
                    record = json.loads(raw)
                except (ValueError, RecursionError):
                    continue
                if isinstance(record, dict):
                    yield record
    except (OSError, TranscriptFormatError):
        return


class _Scan:
    """What the raw lines say beyond the nodes: agent ids, line parents, compact boundaries."""

    def __init__(self) -> None:
        self.agent_of_uuid: dict[str, str] = {}
        self.tool_of_agent: dict[str, str] = {}
        self.parent_of_uuid: dict[str, str | None] = {}
        self.uuid_counts: dict[str, int] = {}
        self.boundaries: dict[str, str] = {}  # boundary uuid -> logicalParentUuid

    def read(self, path: str) -> None:
        for record in _lines(path):
            uuid = record.get("uuid")
            if isinstance(uuid, str):
                self.uuid_counts[uuid] = self.uuid_counts.get(uuid, 0) + 1
                parent = record.get("parentUuid")
                self.parent_of_uuid[uuid] = parent if isinstance(parent, str) else None
                agent = record.get("agentId")
                if isinstance(agent, str) and agent:
                    self.agent_of_uuid[uuid] = agent
                logical = record.get("logicalParentUuid")
                if record.get("subtype") == "compact_boundary" and isinstance(logical, str):
                    self.boundaries[uuid] = logical
            result = record.get("toolUseResult")
            message = record.get("message")
            if isinstance(result, Mapping) and isinstance(message, Mapping):
                agent = result.get("agentId")
                content = message.get("content")
                if isinstance(agent, str) and agent and isinstance(content, list):
                    for block in content:
                        if isinstance(block, Mapping) and block.get("type") == "tool_result":
                            tool_id = block.get("tool_use_id")
                            if isinstance(tool_id, str):
                                self.tool_of_agent[agent] = tool_id

    def unique(self, uuid: str) -> bool:
        return self.uuid_counts.get(uuid, 0) == 1


def _first_text(node: Node) -> str:
    for block in node.bucket.content:
        if block.type == "text" and block.text:
            return block.text.strip()
    return ""


def _uuids(node: Node) -> list[str]:
    uuids = node.metadata.get("uuids")
    return [u for u in uuids if isinstance(u, str)] if isinstance(uuids, list) else []


def link_sessions(results: Sequence[ImportResult]) -> list[ImportResult]:
    """Add ``parent_tool_use_id`` and ``logical_parent`` metadata to Claude Code roots.

    Args:
        results: import results of files imported together (any formats; only
            ``claude-code`` results with a ``path`` are looked at).

    Returns:
        The results, with the linked nodes replaced by copies carrying the new metadata
        (hashes unchanged). A node that already has a ``parent_tool_use_id`` keeps it.
    """
    scan = _Scan()
    prompts: dict[str, str] = {}
    node_of_uuid: dict[str, str] = {}
    for result in results:
        if result.format != "claude-code":
            continue
        if result.path is not None:
            scan.read(result.path)
        for node in result.nodes:
            for uuid in _uuids(node):
                node_of_uuid[uuid] = node.hash
            for block in node.bucket.content:
                if block.type == "tool_use" and block.tool_name in _TASK_TOOLS:
                    prompt = (block.tool_input or {}).get("prompt")
                    if isinstance(prompt, str) and prompt.strip():
                        key = prompt.strip()
                        seen = prompts.get(key)
                        prompts[key] = block.tool_use_id if seen is None else _AMBIGUOUS

    def message_node(uuid: str) -> str | None:
        """The node holding line ``uuid``, or its nearest message ancestor's node."""
        seen: set[str] = set()
        current: str | None = uuid
        while current is not None and current not in seen and scan.unique(current):
            seen.add(current)
            if current in node_of_uuid:
                return node_of_uuid[current]
            current = scan.parent_of_uuid.get(current)
        return None

    def boundary_of(uuid: str) -> str | None:
        """The compact boundary above line ``uuid`` through non-message lines, if any."""
        seen: set[str] = set()
        current = scan.parent_of_uuid.get(uuid)
        while current is not None and current not in seen and current not in node_of_uuid:
            seen.add(current)
            if current in scan.boundaries:
                return current
            current = scan.parent_of_uuid.get(current)
        return None

    linked: list[ImportResult] = []
    for result in results:
        if result.format != "claude-code":
            linked.append(result)
            continue
        nodes: list[Node] = []
        for node in result.nodes:
            extra: dict[str, Any] = {}
            uuids = _uuids(node)
            if node.parent_hash is None and uuids:
                first = uuids[0]
                if "parent_tool_use_id" not in node.metadata:
                    agent = scan.agent_of_uuid.get(first)
                    tool_id = scan.tool_of_agent.get(agent) if agent else None
                    if tool_id is None and (node.metadata.get("is_sidechain") or agent):
                        tool_id = prompts.get(_first_text(node)) or None
                    if tool_id:
                        extra["parent_tool_use_id"] = tool_id
                boundary = boundary_of(first)
                if boundary is not None:
                    logical = scan.boundaries[boundary]
                    target = message_node(logical)
                    extra["logical_parent_uuid"] = logical
                    if target is not None and target != node.hash:
                        extra["logical_parent"] = target
            nodes.append(node.with_metadata(**extra) if extra else node)
        linked.append(dataclasses.replace(result, nodes=tuple(nodes)))
    return linked
