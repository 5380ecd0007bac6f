"""The one nesting limit of the model (issue 14 item 6): ``MAX_VALUE_DEPTH`` levels for every
JSON value a block or node holds, never a ``RecursionError``.

A block's ``tool_input`` / ``content`` sits four levels down in the node-hash preimage
``{"content": {"content": [block]}}``, so ``MAX_VALUE_DEPTH = canonical.MAX_DEPTH - 4`` (508)
keeps that preimage within ``canonical.MAX_DEPTH`` (512). Expected ids are digests of the
preimage written out here by hand (DESIGN section 3), not of anything the model builds.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

import pytest
from support import nest

from merkle_memory import canonical
from merkle_memory.dag import Bucket, ContentBlock, Node, node_hash
from merkle_memory.errors import ContentBlockError, NodeFormatError
from merkle_memory.projection import prune_tool_input

LIMIT = 508
TOO_DEEP = "nested deeper than 508 levels (canonical.MAX_DEPTH - 4)"


def nest_list(levels: int) -> list[Any]:
    """An array ``levels`` deep whose innermost array is ``["x"]``."""
    value: list[Any] = ["x"]
    for _ in range(levels - 1):
        value = [value]
    return value


def depth(value: Any) -> int:
    """Nesting of arrays and objects in ``value`` (the value itself is level 1)."""
    level, frontier = 0, [value]
    while frontier:
        level += 1
        frontier = [
            child
            for item in frontier
            for child in (item.values() if isinstance(item, dict) else item)
            if isinstance(child, dict | list)
        ]
    return level


def at_stack_depth(frames: int, call: Callable[[], Any]) -> Any:
    """``call()`` made with about ``frames`` Python frames already on the stack."""
    if frames <= 0:
        return call()
    return at_stack_depth(frames - 1, call)


def test_the_limit_is_canonical_max_depth_less_four() -> None:
    """The limit is derived from canonical.MAX_DEPTH, and the helpers nest what they say."""
    from merkle_memory._json import MAX_VALUE_DEPTH

    assert MAX_VALUE_DEPTH == canonical.MAX_DEPTH - 4 == LIMIT
    assert depth(nest(LIMIT)) == LIMIT and depth(nest_list(3)) == 3


def test_block_at_the_limit_hashes_to_the_hand_built_preimage() -> None:
    """A tool_input 508 deep is accepted, and its node id is the digest of the preimage,
    which is then exactly canonical.MAX_DEPTH (512) deep."""
    block = ContentBlock("tool_use", tool_use_id="t1", tool_name="x", tool_input=nest(LIMIT))
    preimage = {
        "parent": "",
        "content": {
            "type": "message",
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "is_error": False,
                    "tool_use_id": "t1",
                    "tool_name": "x",
                    "tool_input": nest(LIMIT),
                }
            ],
        },
    }
    assert depth(preimage) == canonical.MAX_DEPTH
    bucket = Bucket("message", "assistant", (block,))
    assert node_hash(bucket, None) == canonical.digest(preimage)
    assert Node.create(bucket).valid


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("tool_input", nest(LIMIT + 1), "block field 'tool_input'"),
        ("content", nest_list(LIMIT + 1), "block field 'content'"),
        ("content", {"x": [nest(LIMIT)]}, "block field 'content'"),
    ],
    ids=["tool_input-509", "content-array-509", "content-mixed-510"],
)
def test_block_one_past_the_limit_is_refused(field: str, value: Any, where: str) -> None:
    """One level past the limit (or more) is a ContentBlockError with the one depth text."""
    with pytest.raises(ContentBlockError) as info:
        ContentBlock("tool_use", **{field: value})
    assert str(info.value) == f"{where}: {TOO_DEEP}"


def test_content_at_the_limit_is_kept_exactly() -> None:
    """``content`` 508 deep (an array) is accepted and kept unchanged."""
    block = ContentBlock("server_tool_result", content=nest_list(LIMIT))
    assert block.content == nest_list(LIMIT)
    assert block.to_dict()["content"] == nest_list(LIMIT)


def test_bucket_from_dict_and_node_metadata_share_the_limit() -> None:
    """Bucket.from_dict and Node metadata: 508 accepted, 509 refused with the same text."""
    ok = {"type": "message", "role": "user", "content": [{"type": "x", "content": nest(LIMIT)}]}
    assert Bucket.from_dict(ok).content[0].content == nest(LIMIT)
    bad = {"type": "message", "role": "user", "content": [{"type": "x", "content": nest(509)}]}
    with pytest.raises(ContentBlockError, match=re.escape(f"block field 'content': {TOO_DEEP}")):
        Bucket.from_dict(bad)
    bucket = Bucket("message", "user", (ContentBlock("text", text="hi"),))
    assert Node.create(bucket, metadata={"m": nest(LIMIT - 1)}).metadata["m"] == nest(LIMIT - 1)
    with pytest.raises(NodeFormatError) as info:
        Node.create(bucket, metadata={"m": nest(LIMIT)})
    assert str(info.value) == f"node metadata: {TOO_DEEP}"


def test_cyclic_values_are_depth_errors() -> None:
    """A value that contains itself is refused as too deep (no RecursionError, no hang)."""
    loop: dict[str, Any] = {}
    loop["self"] = loop
    with pytest.raises(ContentBlockError, match=re.escape(TOO_DEEP)):
        ContentBlock("tool_use", tool_input=loop)
    with pytest.raises(ContentBlockError, match=re.escape(TOO_DEEP)):
        prune_tool_input(loop)


def test_prune_tool_input_at_and_past_the_limit() -> None:
    """prune_tool_input walks 508 levels (pruning zeros at every level) and refuses 509."""
    value: dict[str, Any] = {"k": 1, "zero": 0}
    for _ in range(LIMIT - 1):
        value = {"a": value, "empty": {}, "no": False}
    pruned = prune_tool_input(value)
    assert pruned == nest(LIMIT)
    with pytest.raises(ContentBlockError) as info:
        prune_tool_input({"a": value})
    assert str(info.value) == f"tool_input: {TOO_DEEP}"


def test_no_recursion_even_on_a_deep_caller_stack() -> None:
    """Building and copying a block 508 deep needs no stack: it works with 700 frames of
    the (default 1,000) recursion limit already in use, where a recursive walk could not."""
    assert sys.getrecursionlimit() <= 1000 or pytest.skip("the recursion limit was raised")

    def build() -> Any:
        block = ContentBlock("tool_use", tool_input=nest(LIMIT), content=nest_list(LIMIT))
        return block.to_dict()["tool_input"], prune_tool_input(nest(LIMIT))

    copied, pruned = at_stack_depth(700, build)
    assert copied == pruned == nest(LIMIT)
