"""Claude Code subagent and compact-boundary links kept as metadata (issue 6 item 4)."""

from __future__ import annotations

import json
from pathlib import Path

from support import cc_line as line
from support import shared_path

from merkle_memory.transcripts import import_file
from merkle_memory.transcripts._links import link_sessions


def test_inline_sidechains_linked_by_prompt() -> None:
    """The two inline sidechain roots of the real session link to their Task tool_use ids;
    hashes do not change."""
    path = shared_path(
        "real_inputs", "d-kimuson_claude-code-viewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
    )
    (before,) = [import_file(path)]
    (after,) = link_sessions([before])
    assert [n.hash for n in after.nodes] == [n.hash for n in before.nodes]
    links = [n.metadata.get("parent_tool_use_id") for n in after.nodes if n.parent_hash is None]
    assert links == [None, "toolu_014YF9TXhDRR7BnpasNJ7gjC", "toolu_01LKfUwrsnof18CpWZQcJH44"]


def test_agent_file_linked_by_agent_id(tmp_path: Path) -> None:
    """An agent-*.jsonl imported with its main session: its root gets the Task's tool_use id
    (via toolUseResult.agentId), even when its prompt differs from the Task prompt."""
    task = {
        "type": "tool_use",
        "id": "toolu_T",
        "name": "Task",
        "input": {"prompt": "Original prompt", "description": "d"},
    }
    main = tmp_path / "main.jsonl"
    main.write_text(
        "\n".join(
            [
                line("u1", None, "user", "do it"),
                line("a1", "u1", "assistant", [task]),
                line(
                    "r1",
                    "a1",
                    "user",
                    [{"type": "tool_result", "tool_use_id": "toolu_T", "content": "done"}],
                    toolUseResult={"agentId": "ag1", "status": "completed"},
                ),
            ]
        )
        + "\n"
    )
    agent = tmp_path / "agent-ag1.jsonl"
    agent.write_text(
        "\n".join(
            [
                line("s1", None, "user", "Reworded prompt", isSidechain=True, agentId="ag1"),
                line("s2", "s1", "assistant", "sub answer", isSidechain=True, agentId="ag1"),
            ]
        )
        + "\n"
    )
    results = link_sessions([import_file(main), import_file(agent)])
    sub_root = results[1].nodes[0]
    assert sub_root.parent_hash is None
    assert sub_root.metadata["parent_tool_use_id"] == "toolu_T"
    assert "parent_tool_use_id" not in results[1].nodes[1].metadata
    assert "parent_tool_use_id" not in results[0].nodes[0].metadata


def test_ambiguous_prompt_links_nothing(tmp_path: Path) -> None:
    """Two Task calls with one prompt: a sidechain with that prompt is not linked."""
    tasks = [
        {"type": "tool_use", "id": f"toolu_{i}", "name": "Task", "input": {"prompt": "same"}}
        for i in (1, 2)
    ]
    path = tmp_path / "s.jsonl"
    path.write_text(
        "\n".join(
            [
                line("u1", None, "user", "go"),
                line("a1", "u1", "assistant", tasks),
                line("x1", None, "user", "same", isSidechain=True),
            ]
        )
        + "\n"
    )
    (result,) = link_sessions([import_file(path)])
    assert "parent_tool_use_id" not in result.nodes[-1].metadata


def test_compact_boundary_logical_parent(tmp_path: Path) -> None:
    """The root after a compact boundary records the node of its logicalParentUuid."""
    path = tmp_path / "s.jsonl"
    boundary = {
        "type": "system",
        "subtype": "compact_boundary",
        "uuid": "b1",
        "parentUuid": None,
        "logicalParentUuid": "a1",
    }
    path.write_text(
        "\n".join(
            [
                line("u1", None, "user", "first"),
                line("a1", "u1", "assistant", "reply"),
                json.dumps(boundary),
                line(
                    "c1", "b1", "user", "Summary of the conversation so far", isCompactSummary=True
                ),
            ]
        )
        + "\n"
    )
    (result,) = link_sessions([import_file(path)])
    root = result.nodes[-1]
    assert root.parent_hash is None
    assert root.metadata["logical_parent"] == result.nodes[1].hash
    assert root.metadata["logical_parent_uuid"] == "a1"
