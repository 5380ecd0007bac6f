"""Tests of merkle_memory.dag: blocks, buckets, nodes, node hashes and the in-memory DAG."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from merkle_memory import canonical
from merkle_memory.dag import Bucket, ContentBlock, Dag, DagNode, Forest, Node, node_hash
from merkle_memory.errors import (
    ContentBlockError,
    DagError,
    NodeFormatError,
    NodeStoreError,
    TranscriptFormatError,
)


def _bucket(text: str, role: str = "user") -> Bucket:
    return Bucket("message", role, (ContentBlock("text", text=text),))


def _chain(*texts: str) -> list[Node]:
    nodes: list[Node] = []
    for text in texts:
        nodes.append(Node.create(_bucket(text), nodes[-1].hash if nodes else None))
    return nodes


# --- ContentBlock --------------------------------------------------------------------------


def test_block_to_dict_always_type_and_is_error() -> None:
    """to_dict always carries type and is_error; other fields only when non-empty."""
    assert ContentBlock("text").to_dict() == {"type": "text", "is_error": False}
    block = ContentBlock("tool_result", tool_result_id="r", tool_output="x", is_error=True)
    assert block.to_dict() == {
        "type": "tool_result",
        "is_error": True,
        "tool_result_id": "r",
        "tool_output": "x",
    }
    assert ContentBlock("x", tool_input={}, content=[]).to_dict() == {
        "type": "x",
        "is_error": False,
    }


def test_block_round_trip_all_fields() -> None:
    """from_dict(to_dict()) gives the same block, with every field set."""
    data = {
        "type": "custom",
        "is_error": True,
        "text": "t",
        "image_url": "u",
        "image_base64": "b",
        "media_type": "image/png",
        "tool_use_id": "id",
        "tool_name": "n",
        "tool_input": {"a": [1, {"b": None}]},
        "tool_result_id": "r",
        "tool_output": "o",
        "thinking": "th",
        "thinking_signature": "sig",
        "content": {"raw": [1, 2.5]},
    }
    block = ContentBlock.from_dict(data)
    assert block.to_dict() == data
    assert ContentBlock.from_dict(block.to_dict()) == block
    assert hash(block) == hash(ContentBlock.from_dict(data))


@pytest.mark.parametrize(
    "data",
    [
        {"type": "text", "bogus": 1},
        {"text": "no type"},
        {"type": ""},
        {"type": 3},
        {"type": "text", "text": 5},
        {"type": "text", "is_error": "no"},
        {"type": "tool_use", "tool_input": ["a"]},
        {"type": "x", "content": float("nan")},
        {"type": "x", "content": {1: "non-str key"}},
        {"type": "text", "text": "\ud800"},
        "not an object",
    ],
)
def test_block_from_dict_rejects(data: object) -> None:
    """Unknown keys, a missing type and wrong types raise ContentBlockError (a DagError and a
    ValueError), not a transcript-format error."""
    with pytest.raises(ContentBlockError) as info:
        ContentBlock.from_dict(data)  # type: ignore[arg-type]
    assert isinstance(info.value, DagError) and isinstance(info.value, ValueError)
    assert not isinstance(info.value, TranscriptFormatError | NodeStoreError)


def test_block_null_means_absent() -> None:
    """A null value in from_dict counts as absent."""
    assert ContentBlock.from_dict({"type": "text", "text": None}) == ContentBlock("text")


def test_block_copies_nested_values() -> None:
    """A block keeps a copy: changing the caller's dict later changes nothing."""
    given_input = {"a": {"b": 1}}
    block = ContentBlock("tool_use", tool_input=given_input)
    given_input["a"]["b"] = 2
    assert block.to_dict()["tool_input"] == {"a": {"b": 1}}
    block.to_dict()["tool_input"]["a"]["b"] = 3
    assert block.to_dict()["tool_input"] == {"a": {"b": 1}}


def test_big_integers_hashed_as_doubles() -> None:
    """Integers beyond 2**53 in tool_input become the nearest double (tapes float64)."""
    block = ContentBlock("tool_use", tool_input={"n": 2**64, "m": -(2**60) - 1})
    assert block.tool_input == {"n": float(2**64), "m": float(-(2**60) - 1)}
    assert canonical.dumps(block.to_dict()) == (
        b'{"is_error":false,"tool_input":{"m":-1152921504606847000,'
        b'"n":18446744073709552000},"type":"tool_use"}'
    )


# --- Bucket and node hash --------------------------------------------------------------------


def test_bucket_from_dict_and_to_dict() -> None:
    """Bucket.from_dict reads the documented keys; to_dict writes them back."""
    data = {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "text", "is_error": False, "text": "Hi"}],
        "model": "m",
        "provider": "p",
        "agent_name": "a",
    }
    assert Bucket.from_dict(data).to_dict() == data
    for bad in ({"type": "message"}, {"type": "m", "role": "u", "x": 1}, {"role": "u"}):
        with pytest.raises(NodeFormatError):
            Bucket.from_dict(bad)
    with pytest.raises(NodeFormatError):
        Bucket.from_dict({"type": "m", "role": "u", "content": "text"})
    with pytest.raises(NodeFormatError):
        Bucket("message", "user", ("not a block",))  # type: ignore[arg-type]
    with pytest.raises(ContentBlockError):
        Bucket.from_dict({"type": "m", "role": "u", "content": [{"text": "no type"}]})


def test_node_hash_known_answer() -> None:
    """The tapes vector: user 'hello world' at the root, then assistant 'Hi' below it."""
    root = node_hash(_bucket("hello world"), None)
    assert root == "7d3a447a18e3f3a102967dde0d802d512f69383907c3d32a48d10058a1f55950"
    assert node_hash(_bucket("hello world"), "") == root
    child = node_hash(_bucket("Hi", "assistant"), root)
    assert child == "3a411d83ddead4f370038cc32de61e8f1d93526f2c3ce6893f36df1d266cec9f"


def test_node_hash_ignores_metadata_and_model() -> None:
    """Model, provider, agent name and node metadata are not hashed; role and parent are."""
    plain = _bucket("x")
    dressed = Bucket("message", "user", plain.content, "opus", "anthropic", "claude-code")
    assert node_hash(plain, None) == node_hash(dressed, None)
    assert node_hash(plain, None) != node_hash(_bucket("x", "assistant"), None)
    parent = "ab" * 32
    assert node_hash(plain, None) != node_hash(plain, parent)
    a = Node.create(plain, metadata={"ts": 1})
    b = Node.create(plain, metadata={"ts": 2})
    assert a.hash == b.hash


def test_node_validation_and_round_trip() -> None:
    """Node checks its hex ids; to_dict/from_dict round-trips; valid detects tampering."""
    node = Node.create(_bucket("x"), "cd" * 32, {"uuid": "u1"})
    again = Node.from_dict(node.to_dict())
    assert again == node
    assert again.valid
    tampered = Node(node.hash, node.parent_hash, _bucket("y"), node.metadata)
    assert not tampered.valid
    for bad_hash in ("", "AB" * 32, "ab" * 31):
        with pytest.raises(NodeFormatError):
            Node(bad_hash, None, _bucket("x"))
    with pytest.raises(NodeFormatError):
        Node("ab" * 32, "nothex", _bucket("x"))
    with pytest.raises(NodeFormatError) as info:
        Node("ab" * 32, None, _bucket("x"), {"bad": float("nan")})
    assert str(info.value) == "node metadata: NaN or infinity is not a JSON number"
    assert node.with_metadata(extra=1).metadata == {"uuid": "u1", "extra": 1}


# --- Dag -------------------------------------------------------------------------------------


def test_dag_add_semantics() -> None:
    """add: a known hash is a no-op; None, an unknown parent and a second root raise DagError
    (a ValueError, not a node-store error: the DAG family stands on its own)."""
    a, b, c = _chain("a", "b", "c")
    dag = Dag()
    assert dag.root is None
    placed = dag.add(a)
    assert dag.add(a) is placed
    dag.add(b)
    assert dag.size() == 2
    with pytest.raises(DagError) as info:
        dag.add(Node.create(_bucket("other root")))
    assert isinstance(info.value, ValueError) and not isinstance(info.value, NodeStoreError)
    with pytest.raises(DagError):
        dag.add(Node.create(_bucket("orphan"), "ef" * 32))
    with pytest.raises(DagError):
        dag.add(None)  # type: ignore[arg-type]
    dag.add(c)
    assert dag.root is placed and len(dag) == 3 and c.hash in dag


def test_dag_queries() -> None:
    """ancestors node-first; descendants pre-order in insertion order; leaves/branch order."""
    root, a = _chain("r", "a")
    a2 = Node.create(_bucket("a2"), a.hash)
    b = Node.create(_bucket("b"), root.hash)
    a1 = Node.create(_bucket("a1"), a.hash)
    dag = Dag()
    for node in (root, a, a2, b, a1):
        dag.add(node)
    hashes = lambda nodes: [n.hash for n in nodes or []]  # noqa: E731
    assert hashes(dag.ancestors(a1.hash)) == [a1.hash, a.hash, root.hash]
    assert hashes(dag.descendants(root.hash)) == [a.hash, a2.hash, a1.hash, b.hash]
    assert dag.descendants(b.hash) == []
    assert dag.descendants("00" * 32) is None
    assert dag.ancestors("00" * 32) is None
    assert dag.get("00" * 32) is None
    assert hashes(dag.leaves()) == [a2.hash, b.hash, a1.hash]
    assert hashes(dag.branch_points()) == [root.hash, a.hash]
    assert dag.is_branching()
    got = dag.get(a.hash)
    assert isinstance(got, DagNode) and got.is_branching() and not got.is_leaf()
    assert got.parent_hash == root.hash and got.bucket.role == "user"


def test_walk_stops_when_told() -> None:
    """walk visits pre-order and stops when the callback returns False (tapes test)."""
    one, two, three = _chain("1", "2", "3")
    dag = Dag()
    for node in (one, two, three):
        dag.add(node)
    seen: list[str] = []

    def visit(node: DagNode) -> bool:
        seen.append(node.hash)
        return node.hash != two.hash

    dag.walk(visit)
    assert seen == [one.hash, two.hash]
    calls: list[DagNode] = []
    Dag().walk(lambda n: calls.append(n) is None)
    assert calls == []


def test_long_chain_no_recursion_limit() -> None:
    """A 5000-turn conversation walks without hitting Python's recursion limit."""
    dag = Dag()
    parent = None
    for i in range(5000):
        node = Node.create(_bucket(str(i)), parent)
        dag.add(node)
        parent = node.hash
    assert parent is not None
    assert len(dag.ancestors(parent) or []) == 5000
    assert dag.root is not None
    assert len(dag.descendants(dag.root.hash) or []) == 4999
    count = 0

    def visit(node: DagNode) -> bool:
        nonlocal count
        count += 1
        return True

    dag.walk(visit)
    assert count == 5000


def test_forest_many_roots() -> None:
    """A Forest accepts several roots and keeps them in insertion order."""
    forest = Forest()
    first = Node.create(_bucket("one"))
    second = Node.create(_bucket("two"))
    forest.add(first)
    forest.add(second)
    assert [n.hash for n in forest.roots()] == [first.hash, second.hash]
    with pytest.raises(DagError):
        forest.add(Node.create(_bucket("x"), "12" * 32))


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=40))
def test_descendants_match_recursive_reference(choices: list[int]) -> None:
    """descendants and walk equal a naive recursive pre-order over a random tree."""
    nodes = [Node.create(_bucket("0"))]
    for i, pick in enumerate(choices, 1):
        nodes.append(Node.create(_bucket(str(i)), nodes[pick % len(nodes)].hash))
    dag = Dag()
    for node in nodes:
        dag.add(node)
    children: dict[str, list[str]] = {}
    for node in nodes:
        if node.parent_hash:
            children.setdefault(node.parent_hash, []).append(node.hash)

    def preorder(h: str) -> list[str]:
        out: list[str] = []
        for c in children.get(h, []):
            out += [c, *preorder(c)]
        return out

    for node in nodes:
        assert [n.hash for n in dag.descendants(node.hash) or []] == preorder(node.hash)
    walked: list[str] = []
    dag.walk(lambda n: walked.append(n.hash) is None)
    assert walked == [nodes[0].hash, *preorder(nodes[0].hash)]
    assert [n.hash for n in dag.leaves()] == [n.hash for n in nodes if n.hash not in children]


# --- model errors and the encoding helpers ---------------------------------------------------


def test_model_errors_are_their_own_family() -> None:
    """A malformed block is a ContentBlockError, a malformed bucket or node a NodeFormatError:
    both DagErrors and ValueErrors, neither a transcript-format nor a node-store error."""
    for error in (ContentBlockError("x"), NodeFormatError("x")):
        assert isinstance(error, DagError) and isinstance(error, ValueError)
        assert not isinstance(error, TranscriptFormatError | NodeStoreError)
    with pytest.raises(ContentBlockError) as info:
        ContentBlock("tool_use", tool_input={"n": float("nan")})
    assert str(info.value) == "block field 'tool_input': NaN or infinity is not a JSON number"
    with pytest.raises(NodeFormatError) as node_info:
        Bucket("message", "")
    assert str(node_info.value) == "bucket role must be a non-empty string"


def test_projected_changes_only_projection_fields() -> None:
    """ContentBlock.projected applies the projection's changes and refuses any other field."""
    block = ContentBlock("thinking", thinking="t", thinking_signature="sig")
    assert block.projected({"thinking_signature": ""}) == ContentBlock("thinking", thinking="t")
    with pytest.raises(ContentBlockError, match="cannot change type"):
        block.projected({"type": "text"})


def test_uncopied_dicts_encode_like_the_copies() -> None:
    """to_dict(copy=False) equals to_dict() and shares the nested values; Bucket.to_json is
    the canonical bytes of Bucket.to_dict()."""
    block = ContentBlock("tool_use", tool_input={"a": {"b": [1]}}, content=[{"x": 1}])
    shared = block.to_dict(copy=False)
    assert shared == block.to_dict()
    assert shared["tool_input"] is block.tool_input and shared["content"] is block.content
    assert block.to_dict()["tool_input"] is not block.tool_input
    bucket = Bucket("message", "assistant", (block,), model="m")
    assert bucket.to_json() == canonical.dumps(bucket.to_dict())
    assert bucket.hashed_bytes() == canonical.dumps(bucket.hashed_content())
