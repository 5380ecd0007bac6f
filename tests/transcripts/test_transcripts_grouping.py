"""The importer grouping rules, pinned by exact node ids (issue 14, "Importer grouping rules").

DESIGN section 3: consecutive Claude Code assistant lines with one ``message.id`` form one node
(lines of another id do not join it); the results of the calls of one assistant turn form one
``user`` node, in a Claude Code session (one line per result) and in an Anthropic request (a
run of ``tool_result`` blocks, over consecutive user messages too), and the text after them in
the same message is the next node. The expected ids are digests of node-hash preimages written
out here by hand (DESIGN section 3), never computed by an importer or the model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from merkle_memory import canonical
from merkle_memory.transcripts import import_file, import_object


def nid(parent: str, role: str, *blocks: dict[str, Any]) -> str:
    """A node id from its preimage, by hand (DESIGN section 3)."""
    content = {"type": "message", "role": role, "content": list(blocks)}
    return canonical.digest({"parent": parent, "content": content})


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "is_error": False, "text": value}


def use(tid: str) -> dict[str, Any]:
    return {"type": "tool_use", "is_error": False, "tool_use_id": tid, "tool_name": "Bash",
            "tool_input": {"command": tid}}  # fmt: skip


def result(tid: str, output: str) -> dict[str, Any]:
    return {"type": "tool_result", "is_error": False, "tool_result_id": tid, "tool_output": output}


# --- source shapes ------------------------------------------------------------------------------


def src_use(tid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": tid}}


def src_result(tid: str, output: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": output}


def line(uuid: str, parent: str | None, role: str, content: Any, mid: str = "") -> dict[str, Any]:
    message: dict[str, Any] = {"role": role, "content": content}
    if mid:
        message["id"] = mid
    return {"type": role, "uuid": uuid, "parentUuid": parent, "sessionId": "s", "message": message}


def test_claude_code_lines_of_one_message_id_are_one_node(tmp_path: Path) -> None:
    """Three assistant lines of ``msg_1`` are one node, the two result lines one node; the
    next assistant lines (``msg_2``, then ``msg_3``) are one node each."""
    lines = [
        line("u1", None, "user", "go"),
        line("a1", "u1", "assistant", [{"type": "text", "text": "two calls"}], "msg_1"),
        line("a2", "a1", "assistant", [src_use("t1")], "msg_1"),
        line("a3", "a2", "assistant", [src_use("t2")], "msg_1"),
        line("r1", "a3", "user", [src_result("t1", "ok")]),
        line("r2", "r1", "user", [src_result("t2", "ok2")]),
        line("a4", "r2", "assistant", [{"type": "text", "text": "done"}], "msg_2"),
        line("a5", "a4", "assistant", [{"type": "text", "text": "and more"}], "msg_3"),
    ]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    user = nid("", "user", text("go"))
    calls = nid(user, "assistant", text("two calls"), use("t1"), use("t2"))
    results = nid(calls, "user", result("t1", "ok"), result("t2", "ok2"))
    done = nid(results, "assistant", text("done"))
    more = nid(done, "assistant", text("and more"))
    imported = import_file(path)
    assert [n.hash for n in imported.nodes] == [user, calls, results, done, more]
    assert [n.metadata["uuids"] for n in imported.nodes] == [
        ["u1"],
        ["a1", "a2", "a3"],
        ["r1", "r2"],
        ["a4"],
        ["a5"],
    ]


def test_anthropic_tool_result_runs_are_one_node() -> None:
    """Results of one turn are one node: split over two user messages (t1, t2) or in one
    (t3, t4); text after results in the same message is the next node, whole."""
    body = {"max_tokens": 1, "messages": [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [src_use("t1"), src_use("t2")]},
        {"role": "user", "content": [src_result("t1", "ok")]},
        {"role": "user", "content": [src_result("t2", "ok2"),
                                     {"type": "text", "text": "now what?"},
                                     {"type": "text", "text": "quickly"}]},
        {"role": "assistant", "content": [src_use("t3"), src_use("t4")]},
        {"role": "user", "content": [src_result("t3", "a"), src_result("t4", "b")]},
    ]}  # fmt: skip
    user = nid("", "user", text("go"))
    calls = nid(user, "assistant", use("t1"), use("t2"))
    results = nid(calls, "user", result("t1", "ok"), result("t2", "ok2"))
    words = nid(results, "user", text("now what?"), text("quickly"))
    calls2 = nid(words, "assistant", use("t3"), use("t4"))
    results2 = nid(calls2, "user", result("t3", "a"), result("t4", "b"))
    imported = import_object(body, "anthropic")
    assert [n.hash for n in imported.nodes] == [user, calls, results, words, calls2, results2]
    assert imported.messages == 6
