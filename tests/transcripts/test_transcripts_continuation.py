"""``build_nodes`` inside ``continuing``: a later part of a file attaches to the hashes its
earlier parts resolved, exactly as a one-shot build of both parts would (dag sync)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from merkle_memory.dag import Bucket, ContentBlock
from merkle_memory.transcripts import RawMessage, build_nodes
from merkle_memory.transcripts._common import Continuation, continuing


def record(key: str, parent: str | None, text: str = "") -> RawMessage:
    """A message record (``text`` empty: a link-only record)."""
    bucket = Bucket("message", "user", (ContentBlock("text", text=text),)) if text else None
    return RawMessage(key, parent, bucket)


def test_a_known_parent_key_attaches_instead_of_detaching() -> None:
    """Without a continuation an unknown parent starts a root (detached); with one that knows
    the key, the record attaches to the known hash; the resolved keys are reported."""
    first = build_nodes([record("a", None, "hi")])
    known = {"a": first.nodes[0].hash}
    alone = build_nodes([record("b", "a", "there")])
    assert (alone.nodes[0].parent_hash, alone.detached) == (None, 1)
    with continuing(Continuation(known=known)) as continuation:
        later = build_nodes([record("b", "a", "there"), record("c", "b")])
    assert (later.nodes[0].parent_hash, later.detached) == (known["a"], 0)
    assert continuation.resolved == {"b": later.nodes[0].hash, "c": later.nodes[0].hash}
    assert build_nodes([record("b", "a", "there")]).detached == 1  # the context is gone


def test_the_first_root_continues_a_chain() -> None:
    """``root_parent``: the first record without a parent key attaches there, later roots
    stay roots; a key of this part shadows a known one."""
    head = build_nodes([record("0", None, "q")]).nodes[0].hash
    with continuing(Continuation(known={"x": None}, root_parent=head)):
        built = build_nodes([record("0", None, "a"), record("1", "0", "b"), record("9", None, "c")])
    assert [n.parent_hash for n in built.nodes] == [head, built.nodes[0].hash, None]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 30), st.booleans()), min_size=2, max_size=25),
    st.data(),
)
def test_split_builds_equal_one_build(shape: list[tuple[int, bool]], data: st.DataObject) -> None:
    """Property: records (each naming an earlier record, or none, as parent; some link-only)
    built in two parts, the second continuing the first's resolved keys, give the nodes of
    one build of all of them."""
    records = []
    for index, (back, kept) in enumerate(shape):
        parent = None if back > index or back == 0 else f"k{index - back}"
        records.append(record(f"k{index}", parent, f"m{index}" if kept or index == 0 else ""))
    cut = data.draw(st.integers(1, len(records) - 1))
    whole = build_nodes(records)
    with continuing(Continuation()) as first:
        head = build_nodes(records[:cut])
    with continuing(Continuation(known=dict(first.resolved))):
        tail = build_nodes(records[cut:])
    assert {n.hash for n in head.nodes} | {n.hash for n in tail.nodes} == {
        n.hash for n in whole.nodes
    }
