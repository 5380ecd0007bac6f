"""Tests of the Claude Code session importer and the common importer rules."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from support import shared_path

from merkle_memory.dag import Bucket, ContentBlock, Forest, node_hash
from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import ImportResult, detect_format, import_file
from merkle_memory.transcripts._common import (
    RawMessage,
    build_nodes,
    tool_arguments,
    tool_result_block,
)
from merkle_memory.transcripts.claude_code import read_file, sniff

KIMUSON = "d-kimuson_claude-code-viewer_5c0375b4-57a5-4f26-b12d-d022ee4e51b7.jsonl"
JAZZY = "jazzyalex_agent-sessions_claude_small.jsonl"
KVSANKAR = "kvsankar_agent-history_claude_forked_session.jsonl"
REMINDER = "<system-reminder>\nThe date changed. Be careful.\n</system-reminder>"


def _forest(result: ImportResult) -> Forest:
    forest = Forest()
    for node in result.nodes:
        forest.add(node)
    return forest


def _shape(path: Path) -> tuple[int, int, int, int, int, int]:
    result = read_file(path)
    forest = _forest(result)
    return (
        result.messages,
        result.skipped,
        forest.size(),
        len(forest.roots()),
        len(forest.leaves()),
        len(forest.branch_points()),
    )


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def _user(uuid: str, parent: str | None, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "parentUuid": parent, "sessionId": "s",
            "message": {"role": "user", "content": content}, **extra}  # fmt: skip


def _asst(uuid: str, parent: str | None, mid: str, content: Any) -> dict[str, Any]:
    message = {"id": mid, "role": "assistant", "model": "m", "content": content}
    return {"type": "assistant", "uuid": uuid, "parentUuid": parent, "message": message}


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


def _tool_use(tid: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tid, "name": "Bash", "input": {"command": tid}}


def _result(tid: str, content: Any = "ok", is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tid, "content": content, "is_error": is_error}


# --- real transcripts (../shared/real_inputs) ---------------------------------------------------


def test_kimuson_shape() -> None:
    """d-kimuson sample: 3 roots (main + 2 inline sidechains), no branch point.

    Counted by hand with a throwaway script over the raw JSON (not this importer): 53 message
    lines; 20 distinct assistant message.ids; tool results answer 17 distinct assistant
    messages (one result node each); 4 plain user lines, of which the first is only
    <command-*> tags (dropped), so 20 + 17 + 3 = 40 nodes. parentUuid null on 3 lines
    (lines 1, 16, 26; line 1 dropped so line 2 is the main root); the 3 lines nobody names as
    parent are the 3 leaves.
    """
    assert _shape(shared_path("real_inputs", KIMUSON)) == (53, 0, 40, 3, 3, 0)


def test_kvsankar_fork_shape() -> None:
    """kvsankar fork fixture: one branch point (fa1-fork) with two leaves below it.

    Counted by hand: 14 message lines, every message.id distinct, no tool-result merging
    (each assistant turn has one tool_use), one root (fu1-fork), fa1-fork has two user
    children, the two chains end in fa3a-fork and fa5b-fork.
    """
    path = shared_path("real_inputs", KVSANKAR)
    assert _shape(path) == (14, 0, 14, 1, 2, 1)
    forest = _forest(read_file(path))
    (branch,) = forest.branch_points()
    assert branch.node.metadata["uuids"] == ["fa1-fork"]
    below = {n.hash for n in forest.descendants(branch.hash) or []}
    leaves = forest.leaves()
    assert all(leaf.hash in below for leaf in leaves)
    assert [leaf.node.metadata["uuids"] for leaf in leaves] == [["fa3a-fork"], ["fa5b-fork"]]


def test_jazzyalex_placeholder_uuids() -> None:
    """jazzyalex schema sample: placeholder uuids never crash and never join turns.

    Counted by hand over the raw JSON: 20 user/assistant lines, 69 other lines. Named uuids:
    u1 (root: its parent sys1 is a system line with no parent), a1 and a-nested-1 under u1,
    u2 and u2b under a1, a2 and a3 under u2, u3 under a3, u-nested-1 under a-nested-1 = 9
    nodes. The 11 message lines sharing uuid "[trimmed for fixture]" cannot link, so each is
    a root; by projected content they are 6 distinct nodes (assistant text, user image+text,
    assistant fallback, assistant thinking+text+tool_use, user text x4, assistant thinking
    x3). Roots 1 + 6 = 7; branch points u1, a1, u2 = 3; leaves u2b, a2, u3, u-nested-1 + 6.
    """
    assert _shape(shared_path("real_inputs", JAZZY)) == (20, 69, 15, 7, 10, 3)


@pytest.mark.parametrize("name", [KIMUSON, JAZZY, KVSANKAR])
def test_real_import_deterministic_and_detected(name: str) -> None:
    """Importing a file twice gives identical nodes; auto-detection names claude-code."""
    path = shared_path("real_inputs", name)
    assert detect_format(path) == "claude-code"
    first = import_file(path)
    assert first.nodes == import_file(path).nodes
    for node in first.nodes:
        assert node.hash == node_hash(node.bucket, node.parent_hash)


def _add_reminders(record: dict[str, Any]) -> dict[str, Any]:
    message = record.get("message")
    if record.get("type") != "user" or not isinstance(message, dict):
        return record
    content = message["content"]
    if isinstance(content, str):
        message["content"] = REMINDER + "\n" + content
    else:
        for block in content:
            if block.get("type") == "text":
                block["text"] += "\n" + REMINDER
            elif block.get("type") == "tool_result" and isinstance(block.get("content"), str):
                block["content"] += "\n" + REMINDER
        content.append(_text(REMINDER))
    return record


@pytest.mark.parametrize("name", [KIMUSON, JAZZY, KVSANKAR])
def test_reminders_in_user_turns_change_no_hash(name: str, tmp_path: Path) -> None:
    """A copy with <system-reminder> added to every user turn has exactly the same node ids."""
    path = shared_path("real_inputs", name)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    noisy = _write(tmp_path / name, [_add_reminders(r) for r in records])
    assert [n.hash for n in read_file(noisy).nodes] == [n.hash for n in read_file(path).nodes]


# --- importer rules on small synthetic sessions -------------------------------------------------


def test_assistant_lines_merge_and_results_group(tmp_path: Path) -> None:
    """Lines of one message.id are one node; results of one turn are one node, interleaved."""
    path = _write(tmp_path / "s.jsonl", [
        _user("u1", None, "go"),
        _asst("a1", "u1", "msg1", [_text("two calls")]),
        _asst("a2", "a1", "msg1", [_tool_use("t1")]),
        _asst("a3", "a2", "msg1", [_tool_use("t2")]),
        _user("r1", "a3", [_result("t1")]),
        _user("side", None, "sidechain root", isSidechain=True),
        _user("r2", "r1", [_result("t2", [_text("a"), _text("b"), {"type": "image"}], True)]),
        _asst("a4", "r2", "msg2", [_text("done")]),
    ])  # fmt: skip
    result = read_file(path)
    assert (result.messages, result.skipped, len(result.nodes)) == (8, 0, 5)
    _, assistant, results, side, done = result.nodes
    assert [b.type for b in assistant.bucket.content] == ["text", "tool_use", "tool_use"]
    assert assistant.metadata["uuids"] == ["a1", "a2", "a3"]
    assert [b.to_dict() for b in results.bucket.content] == [
        {"type": "tool_result", "is_error": False, "tool_result_id": "t1", "tool_output": "ok"},
        {"type": "tool_result", "is_error": True, "tool_result_id": "t2",
         "tool_output": "a\nb", "content": [{"type": "image"}]},
    ]  # fmt: skip
    assert results.parent_hash == assistant.hash and done.parent_hash == results.hash
    assert side.parent_hash is None and side.metadata["is_sidechain"] is True
    assert results.bucket.role == "user"


def test_results_of_another_turn_not_merged(tmp_path: Path) -> None:
    """A result line whose id the assistant turn did not call stays its own node."""
    path = _write(tmp_path / "s.jsonl", [
        _asst("a1", None, "m1", [_tool_use("t1")]),
        _user("r1", "a1", [_result("t1")]),
        _user("r2", "r1", [_result("zz")]),
        _user("r3", "r2", [_result("t1", "again")]),
    ])  # fmt: skip
    assert len(read_file(path).nodes) == 4


def test_empty_message_children_reattach(tmp_path: Path) -> None:
    """A turn that is only harness tags is not a node; its child attaches to its parent."""
    path = _write(tmp_path / "s.jsonl", [
        _user("u1", None, "hello"),
        _user("u2", "u1", "<command-name>/cost</command-name>"),
        {"type": "system", "uuid": "s1", "parentUuid": "u2", "content": "x"},
        _asst("a1", "s1", "m", [_text("hi")]),
    ])  # fmt: skip
    result = read_file(path)
    assert (result.messages, result.skipped, result.dropped) == (3, 1, 1)
    first, second = result.nodes
    assert second.parent_hash == first.hash


def test_duplicate_and_unknown_uuids(tmp_path: Path) -> None:
    """Repeated or unknown uuids never crash and never join unrelated turns."""
    path = _write(tmp_path / "s.jsonl", [
        _user("dup", None, "first"),
        _user("dup", None, "second, unrelated"),
        _asst("a1", "dup", "m1", [_text("whose child?")]),
        _asst("a2", "nowhere", "m2", [_text("lost parent")]),
        _user("same", None, "exact"),
        _user("same", None, "exact"),
        _user("self", "self", "loop"),
    ])  # fmt: skip
    result = read_file(path)
    forest = _forest(result)
    assert len(forest.roots()) == forest.size() == 6
    assert result.duplicates == 1 and result.detached == 3
    assert result.nodes[2].metadata["detached_from"] == "dup"


def test_forward_reference_waits_for_parent() -> None:
    """build_nodes attaches a child listed before its parent once the parent appears."""
    parent = RawMessage("p", None, Bucket("message", "user", (ContentBlock("text", text="p"),)))
    child = RawMessage("c", "p", Bucket("message", "assistant", (ContentBlock("text", text="c"),)))
    built = build_nodes([child, parent])
    assert [n.bucket.role for n in built.nodes] == ["user", "assistant"]
    assert built.nodes[1].parent_hash == built.nodes[0].hash
    cycle = [RawMessage("x", "y", child.bucket), RawMessage("y", "x", parent.bucket)]
    assert build_nodes(cycle).detached == 1


def test_block_mapping(tmp_path: Path) -> None:
    """thinking, image, tool_use, unknown blocks and lone surrogates map as documented."""
    line = json.dumps(_asst("a1", None, "m", [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}},
        {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
        {"type": "tool_use", "id": "t", "name": "N", "input": {"big": 2**64}, "caller": {}},
        {"type": "fallback", "from": {"model": "a"}, "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "cut \\ud83d"},
    ]))  # fmt: skip
    (tmp_path / "s.jsonl").write_text(line.replace("\\\\ud83d", "\\ud83d") + "\n")
    (node,) = read_file(tmp_path / "s.jsonl").nodes
    assert [b.to_dict() for b in node.bucket.content] == [
        {"type": "thinking", "is_error": False, "thinking": "hmm", "thinking_signature": "sig"},
        {"type": "image", "is_error": False, "image_base64": "AA", "media_type": "image/png"},
        {"type": "image", "is_error": False, "image_url": "https://x/y.png"},
        {"type": "tool_use", "is_error": False, "tool_use_id": "t", "tool_name": "N",
         "tool_input": {"big": float(2**64)}},
        {"type": "fallback", "is_error": False, "content": {"from": {"model": "a"}}},
        {"type": "text", "is_error": False, "text": "cut \ufffd"},
    ]  # fmt: skip
    assert node.metadata["model"] == "m" and node.bucket.model == "m"


def test_torn_last_line_skipped_bad_middle_line_fails(tmp_path: Path) -> None:
    """A torn last line (no newline) is skipped; a bad line elsewhere is an error."""
    good = json.dumps(_user("u1", None, "hi")) + "\n"
    torn = tmp_path / "torn.jsonl"
    torn.write_text(good + '{"type": "user", "mess')
    result = read_file(torn)
    assert (result.messages, result.skipped, len(result.nodes)) == (1, 1, 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "user", "mess\n' + good)
    with pytest.raises(TranscriptFormatError, match=":1: not a JSON line"):
        read_file(bad)
    with pytest.raises(TranscriptFormatError, match="not a JSON object"):
        read_file(_write(tmp_path / "list.jsonl", [[1, 2]]))  # type: ignore[list-item]
    with pytest.raises(TranscriptFormatError, match="content must be"):
        read_file(_write(tmp_path / "c.jsonl", [_user("u", None, 5)]))


def test_sniff() -> None:
    """sniff recognises Claude Code lines and nothing else."""
    assert sniff(b'{"parentUuid": null, "type": "user"}\n')
    assert sniff(b'{"type": "summary", "summary": "x", "leafUuid": "u"}\n')
    assert not sniff(b'{"type": "session_meta", "payload": {}}\n')
    assert not sniff(b"not json at all")


# --- helpers ---------------------------------------------------------------------------------


def test_tool_arguments() -> None:
    """Objects kept, JSON-object strings parsed, anything else kept as raw text."""
    assert tool_arguments({"a": 1}) == {"a": 1}
    assert tool_arguments('{"a": 1}') == {"a": 1}
    assert tool_arguments("ls -la") == {"arguments": "ls -la"}
    assert tool_arguments("[1, 2]") == {"arguments": "[1, 2]"}
    assert tool_arguments([1, "é"]) == {"arguments": '[1,"é"]'}
    assert tool_arguments(None) is None and tool_arguments("") is None


def test_tool_result_block() -> None:
    """String output, part lists (text joined by newlines, others in content), errors."""
    assert tool_result_block("t", "out").to_dict() == {
        "type": "tool_result", "is_error": False, "tool_result_id": "t", "tool_output": "out"
    }  # fmt: skip
    parts = [_text("a"), {"type": "image", "source": {}}, _text("b")]
    assert tool_result_block("t", parts, is_error=True).to_dict() == {
        "type": "tool_result", "is_error": True, "tool_result_id": "t", "tool_output": "a\nb",
        "content": [{"type": "image", "source": {}}],
    }  # fmt: skip
    assert tool_result_block("t", {"k": 1}).content == {"k": 1}
    with pytest.raises(TranscriptFormatError):
        tool_result_block(5, "x")  # type: ignore[arg-type]
