"""The Claude Code importer's fast path (issue 15 item 4) against the careful reference path.

The fast path keeps the values ``json.loads`` has just produced instead of copying them
(``ContentBlock.from_parsed``, ``anthropic_block(..., owned=True)``). The reference path
builds every block with the checking, copying constructor. Both must give the same node ids,
counts and metadata, or the same error text, for any file: a generated session, and lines
holding hostile values.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from merkle_memory.dag import Bucket, ContentBlock
from merkle_memory.errors import TranscriptFormatError
from merkle_memory.transcripts import _blocks, claude_code, import_file
from merkle_memory.transcripts._common import ImportResult, RawMessage, build_nodes

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gen_transcript import generate


def _careful(monkeypatch: pytest.MonkeyPatch) -> None:
    """Route the importer through the reference path: every block checked and copied."""

    def careful_block(item: Any, *, owned: bool = False) -> Any:
        return _blocks.anthropic_block(item)

    monkeypatch.setattr(claude_code, "anthropic_block", careful_block)


def _outcome(path: Path) -> tuple[Any, ...]:
    try:
        result = import_file(path, "claude-code")
    except TranscriptFormatError as exc:
        return ("error", str(exc), exc.line)
    return _summary(result)


def _summary(result: ImportResult) -> tuple[Any, ...]:
    return (
        [(n.hash, n.parent_hash, n.bucket.to_dict(), dict(n.metadata)) for n in result.nodes],
        result.messages,
        result.skipped,
        result.dropped,
        result.duplicates,
        result.detached,
    )


def test_generated_session_same_ids_as_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A generated 3,000-turn session imports to exactly the same nodes through both paths."""
    path = tmp_path / "session.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        generate(handle, 3000, seed=7)
    fast = _outcome(path)
    with monkeypatch.context() as patch:
        _careful(patch)
        careful = _outcome(path)
    assert fast[0] and fast[0][0] != "error"
    assert fast == careful


def _line(message: dict[str, Any], uuid: str = "u1", parent: str | None = None) -> dict[str, Any]:
    return {
        "parentUuid": parent,
        "type": message["role"],
        "uuid": uuid,
        "sessionId": "s",
        "timestamp": "t",
        "message": message,
    }


# Hostile leaves: lone surrogates (written as \\ud escapes), huge and unsafe integers, -0.0,
# 1e21, NaN and infinity literals, numbers that overflow to infinity.
_RAW_LEAVES = st.sampled_from(
    [
        '"\\ud800"',
        '"a\\udfffb"',
        '"\\ud83d\\ude00"',
        "9007199254740993",
        "-9007199254740993",
        "1" + "0" * 400,
        "-0.0",
        "1e21",
        "1e400",
        "NaN",
        "-Infinity",
        '"\\u00e9<system-reminder>x</system-reminder>"',
        '"a \\n\\n\\n b\\t\\n"',
        "0",
        "false",
        "null",
        "[]",
        "{}",
    ]
)


def _nest(raw: str, depth: int) -> str:
    return "[" * depth + raw + "]" * depth


_RAW_VALUE = st.one_of(
    _RAW_LEAVES,
    st.builds(_nest, _RAW_LEAVES, st.sampled_from([1, 505, 506, 507, 508, 600])),
    st.lists(_RAW_LEAVES, max_size=3).map(lambda xs: "[" + ",".join(xs) + "]"),
    st.lists(st.tuples(_RAW_LEAVES, _RAW_LEAVES), max_size=3).map(
        lambda kv: "{" + ",".join(f'"k{i}":{v}' for i, (_, v) in enumerate(kv)) + "}"
    ),
)


def _block_text(kind: str, raw: str) -> str:
    if kind == "tool_use":
        return f'{{"type":"tool_use","id":"t1","name":"Bash","input":{{"a":{raw},"b":{raw}}}}}'
    if kind == "tool_result":
        parts = f'[{raw},{{"type":"text","text":{raw}}}]'
        return f'{{"type":"tool_result","tool_use_id":"t1","content":{parts}}}'
    if kind == "text":
        return f'{{"type":"text","text":{raw}}}'
    return f'{{"type":"server_tool_result","tool_use_id":"t1","content":{raw},"x":{raw}}}'


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    blocks=st.lists(
        st.tuples(st.sampled_from(["tool_use", "tool_result", "text", "other"]), _RAW_VALUE),
        min_size=1,
        max_size=3,
    ),
    role=st.sampled_from(["user", "assistant"]),
    session=st.sampled_from(["s", "s\\ud800"]),
)
def test_hostile_lines_same_outcome_as_reference(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    blocks: list[tuple[str, str]],
    role: str,
    session: str,
) -> None:
    """Lines with lone surrogates, huge integers, deep nesting, -0.0, 1e21, NaN: the fast path
    gives the same nodes, or the same error text and line, as the reference path."""
    content = ",".join(_block_text(kind, raw) for kind, raw in blocks)
    first = json.dumps(_line({"role": "user", "content": "start"}, "u0"))
    second = (
        f'{{"parentUuid":"u0","type":"{role}","uuid":"u1","sessionId":"{session}",'
        f'"message":{{"role":"{role}","id":"m1","content":[{content}]}}}}'
    )
    path = tmp_path / "hostile.jsonl"
    path.write_text(first + "\n" + second + "\n", encoding="utf-8")
    fast = _outcome(path)
    with monkeypatch.context() as patch:
        _careful(patch)
        careful = _outcome(path)
    assert fast == careful


_BUCKETS = [
    Bucket("message", "user", (ContentBlock("text", text="a"),)),
    Bucket("message", "assistant", (ContentBlock("text", text="b"),)),
    Bucket("message", "user", (ContentBlock("text", text="<system-reminder>x</system-reminder>"),)),
    None,
]
_METADATA = st.dictionaries(
    st.sampled_from(["source", "uuids", "k\u00e9", "\ud800"]),
    st.one_of(
        st.text(max_size=3),
        st.lists(st.integers(-(2**60), 2**60), max_size=2),
        st.sampled_from([float("nan"), (1, 2), "\ud800", 1e21, None, True]),
    ),
    max_size=3,
)


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "c", "d"]),
            st.sampled_from(["a", "b", "c", "x", None]),
            st.sampled_from(range(len(_BUCKETS))),
            _METADATA,
        ),
        max_size=8,
    )
)
def test_owned_metadata_builds_the_same_nodes(records: list[tuple[Any, ...]]) -> None:
    """``build_nodes(owned=True)`` (metadata kept, checked) gives the nodes, counts and
    errors of ``build_nodes`` (metadata copied), whatever the keys, parents and metadata."""

    def build(owned: bool) -> tuple[Any, ...]:
        raw = [
            RawMessage(key, parent, _BUCKETS[bucket], json.loads(json.dumps(meta)))
            if "\\ud800" not in json.dumps(meta)
            else RawMessage(key, parent, _BUCKETS[bucket], dict(meta))
            for key, parent, bucket, meta in records
        ]
        try:
            built = build_nodes(raw, owned=owned)
        except TranscriptFormatError as exc:
            return ("error", str(exc))
        nodes = [(n.hash, n.parent_hash, n.bucket, repr(n.metadata)) for n in built.nodes]
        return (nodes, built.dropped, built.duplicates, built.detached)

    assert build(True) == build(False)
