"""Fast paths of the block model checked against their careful references (issue 15 item 4):
``plain_json`` against ``json_copy``, ``ContentBlock.from_parsed`` and ``Node.from_parsed``
against the constructors, ``projected`` against the fields it keeps, ``normalize_whitespace``
against tapes' three regular-expression steps, ``project_text`` against the two steps it
stands for."""

from __future__ import annotations

import json
import re
from dataclasses import FrozenInstanceError
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from merkle_memory._json import MAX_VALUE_DEPTH, json_copy, plain_json
from merkle_memory.dag import Bucket, ContentBlock, Node
from merkle_memory.errors import ContentBlockError, NodeFormatError
from merkle_memory.projection import (
    GO_SPACE,
    HARNESS_TAGS,
    normalize_whitespace,
    project_text,
    strip_tags,
)

_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.sampled_from([2**53 - 1, 2**53, -(2**53), 10**400, -0.0, 1e21, 1e-7]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(alphabet=st.sampled_from(["a", "\u00e9", "\ud800", "\udfff", "\U0001f600", "\n"])),
)
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "\ud800", "\u00e9"]), inner, max_size=3),
        st.lists(inner, max_size=2).map(tuple),
        st.dictionaries(st.integers(0, 2), inner, min_size=1, max_size=2),  # non-str keys
    ),
    max_leaves=12,
)


def _deep(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth - 1):
        value = [value]
    return {"a": value}


def _result(func: Any, *args: Any, **kwargs: Any) -> tuple[str, Any]:
    try:
        return ("ok", json.dumps(func(*args, **kwargs), sort_keys=True, default=repr))
    except ContentBlockError as exc:
        return ("error", str(exc))


@given(_VALUES, st.booleans())
def test_plain_json_equals_json_copy(value: Any, surrogates: bool) -> None:
    """``plain_json`` gives what ``json_copy`` gives (value or error text); when strings are
    declared surrogate-free and hold none, too."""
    if not surrogates and "\\ud" in json.dumps(value, default=repr):
        surrogates = True  # the promise would be false
    assert _result(plain_json, value, "v", surrogates=surrogates) == _result(json_copy, value, "v")


@pytest.mark.parametrize("depth", [MAX_VALUE_DEPTH - 1, MAX_VALUE_DEPTH, MAX_VALUE_DEPTH + 1])
def test_plain_json_depth_limit(depth: int) -> None:
    """508 levels pass, 509 are refused with the depth text, as ``json_copy``."""
    value = _deep(depth)
    assert _result(plain_json, value, "v") == _result(json_copy, value, "v")


def test_plain_json_keeps_a_plain_value() -> None:
    """A plain value is returned itself (no copy); one to convert is a copy."""
    value = {"a": [1, -0.0, 1e21, "x"], "b": {"c": None}}
    assert plain_json(value, "v") is value
    big = {"a": 2**60}
    out = plain_json(big, "v")
    assert out == {"a": float(2**60)} and out is not big


def test_plain_json_cycle_is_the_depth_error() -> None:
    """A cyclic value is refused as too deep, as ``json_copy`` refuses it."""
    cyclic: list[Any] = []
    cyclic.append(cyclic)
    assert _result(plain_json, cyclic, "v") == _result(json_copy, cyclic, "v")
    assert _result(plain_json, cyclic, "v")[0] == "error"


_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "text": st.one_of(st.text(max_size=5), st.integers()),
        "tool_use_id": st.text(max_size=3),
        "tool_input": st.one_of(_VALUES, st.dictionaries(st.text(max_size=2), _VALUES)),
        "tool_output": st.text(max_size=5),
        "is_error": st.one_of(st.booleans(), st.integers(0, 1)),
        "content": _VALUES,
    },
)


@given(st.sampled_from(["text", "tool_use", "", "\ud800"]), _FIELDS)
def test_from_parsed_equals_constructor(kind: str, fields: dict[str, Any]) -> None:
    """``ContentBlock.from_parsed`` (surrogates checked) gives an equal block or the same
    error as the constructor."""

    def build(make: Any) -> tuple[str, Any]:
        try:
            return ("ok", make(kind, **fields).to_dict())
        except ContentBlockError as exc:
            return ("error", str(exc))

    assert build(ContentBlock.from_parsed) == build(ContentBlock)


def test_from_parsed_rejects_unknown_field() -> None:
    """An unknown keyword is a ``TypeError``, as for the constructor."""
    with pytest.raises(TypeError):
        ContentBlock.from_parsed("text", colour="red")


_SPACES_BEFORE_NEWLINE = re.compile(r"[ \t]+\n")
_NEWLINE_RUN = re.compile(r"\n{2,}")


def _reference_normalize(text: str) -> str:
    text = text.replace("\r\n", "\n")
    text = _SPACES_BEFORE_NEWLINE.sub("\n", text)
    text = _NEWLINE_RUN.sub("\n", text)
    return text.strip(GO_SPACE)


@given(st.text(alphabet=st.sampled_from(["a", " ", "\t", "\n", "\r", "\u00a0", "\x1c"])))
def test_normalize_whitespace_equals_reference(text: str) -> None:
    """The guarded, regex-light ``normalize_whitespace`` equals the three plain steps."""
    assert normalize_whitespace(text) == _reference_normalize(text)


class _Text(str):
    """A ``str`` subclass: ``project_text`` hands it to the two steps as they are."""


@given(
    st.one_of(
        st.lists(
            st.sampled_from(
                ["a", " ", "\t", "\n", "\r", "\u00a0", "<", ">", "/", *HARNESS_TAGS[:3]]
            ),
            max_size=20,
        ).map("".join),
        st.sampled_from(["<session>x</session>\n\n y \n", "<status>", "a<b", "\u3000"]),
    ),
    st.booleans(),
)
def test_project_text_equals_its_steps(text: str, subclass: bool) -> None:
    """``project_text`` is ``normalize_whitespace(strip_tags(text))`` for any text (tags
    stripped only from a text holding ``<``), a ``str`` subclass included."""
    value = _Text(text) if subclass else text
    assert project_text(value) == normalize_whitespace(strip_tags(text))
    assert type(project_text(value)) is type(normalize_whitespace(strip_tags(value)))


def test_project_text_refuses_what_the_steps_refuse() -> None:
    """Not a string: the error of ``strip_tags``."""
    with pytest.raises(ContentBlockError, match="strip_tags takes a str, not int"):
        project_text(7)  # type: ignore[arg-type]


def test_normalize_whitespace_long_newline_run() -> None:
    """A run of 100,000 newlines collapses in a few passes to one."""
    assert normalize_whitespace("a" + "\n" * 100_000 + "b") == "a\nb"


_ALL_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        name: st.one_of(st.text(max_size=3), st.sampled_from(["\u00e9", "a\ud800", 7, None]))
        for name in ContentBlock.FIELDS
        if name not in ("type", "tool_input", "is_error", "content")
    }
    | {
        "tool_input": st.one_of(_VALUES, st.dictionaries(st.text(max_size=2), _VALUES)),
        "is_error": st.one_of(st.booleans(), st.integers(0, 1)),
        "content": _VALUES,
    },
)


@given(st.sampled_from(["text", "tool_use", "", "\ud800", "\u00e9"]), _ALL_FIELDS, st.booleans())
def test_from_parsed_every_field_equals_constructor(
    kind: str, fields: dict[str, Any], surrogate_free: bool
) -> None:
    """Every field, any type: ``from_parsed`` gives an equal block (all 14 fields) or the same
    error as the constructor; promising no surrogates only skips the surrogate search."""
    if surrogate_free and "\\ud" in json.dumps([kind, fields], default=repr):
        surrogate_free = False  # the promise would be false

    def build(make: Any) -> tuple[str, Any]:
        try:
            block = make(kind, **fields)
        except ContentBlockError as exc:
            return ("error", str(exc))
        return ("ok", [getattr(block, name) for name in ContentBlock.FIELDS], type(block))

    fast = build(lambda k, **f: ContentBlock.from_parsed(k, surrogate_free=surrogate_free, **f))
    assert fast == build(ContentBlock)


def test_projected_copies_every_field() -> None:
    """``projected`` keeps every field it is not told to change (all 14, in a fresh frozen
    block), so the mutable twin it is filled in has the block's exact slots."""
    from merkle_memory.blocks import _Draft

    assert _Draft.__slots__ == ContentBlock.__slots__  # type: ignore[attr-defined]
    block = ContentBlock(
        "x",
        text="t",
        image_url="u",
        image_base64="b",
        media_type="m",
        tool_use_id="i",
        tool_name="n",
        tool_input={"a": 1},
        tool_result_id="r",
        tool_output="o",
        is_error=True,
        thinking="th",
        thinking_signature="s",
        content=[1],
    )
    same = block.projected({})
    assert same == block and same is not block and type(same) is ContentBlock
    changed = block.projected({"text": "T", "thinking_signature": ""})
    assert [getattr(changed, n) for n in ContentBlock.FIELDS] == [
        "x",
        "T",
        "u",
        "b",
        "m",
        "i",
        "n",
        {"a": 1},
        "r",
        "o",
        True,
        "th",
        "",
        [1],
    ]
    with pytest.raises(FrozenInstanceError):
        changed.text = "again"  # type: ignore[misc]


@given(
    st.dictionaries(st.sampled_from(["a", "b", "\u00e9", "\ud800"]), _VALUES, max_size=3),
    st.sampled_from(["ab" * 32, "AB" * 32, "x", None]),
)
def test_node_from_parsed_equals_constructor(metadata: dict[str, Any], parent: Any) -> None:
    """``Node.from_parsed`` gives a node equal to the constructor's (metadata included) or the
    same error; plain metadata is kept as given, anything else copied as the constructor does."""
    bucket = Bucket("message", "user", (ContentBlock("text", text="hi"),))

    def build(make: Any) -> tuple[str, Any]:
        try:
            node = make("cd" * 32, parent, bucket, metadata)
        except NodeFormatError as exc:
            return ("error", str(exc))
        return ("ok", node, json.dumps(node.metadata, sort_keys=True, default=repr))

    fast = build(Node.from_parsed)
    assert fast == build(Node)
    if fast[0] == "ok":
        kept = Node.from_parsed("cd" * 32, parent, bucket, metadata).metadata
        assert (kept is metadata) == (plain_json(metadata, "v") is metadata)


def test_node_from_parsed_is_a_frozen_node() -> None:
    """The node ``from_parsed`` fills in a mutable twin is a plain frozen ``Node`` afterwards
    (its class, its equality and hash, no assignment); a subclass is built the plain way."""
    bucket = Bucket("message", "user", (ContentBlock("text", text="hi"),))
    metadata = {"source": "x", "uuids": ["u"], "lines": [1]}
    node = Node.from_parsed("cd" * 32, "ab" * 32, bucket, metadata)
    assert type(node) is Node
    assert node == Node("cd" * 32, "ab" * 32, bucket, metadata)
    assert hash(node) == hash(Node("cd" * 32, "ab" * 32, bucket, metadata))
    assert node.metadata is metadata
    with pytest.raises(FrozenInstanceError):
        node.hash = "ef" * 32  # type: ignore[misc]

    class _Sub(Node):
        pass

    sub = _Sub.from_parsed("cd" * 32, None, bucket, metadata)
    assert type(sub) is _Sub
    assert (sub.hash, sub.parent_hash, sub.bucket, sub.metadata) == (
        "cd" * 32,
        None,
        bucket,
        metadata,
    )


def test_node_from_parsed_refuses_what_the_constructor_refuses() -> None:
    """A bad hash, parent, bucket or metadata type: the constructor's error text."""
    bucket = Bucket("message", "user", ())
    cases: list[tuple[Any, ...]] = [
        ("x", None, bucket, {}),
        ("ab" * 32, "X" * 64, bucket, {}),
        ("ab" * 32, None, "bucket", {}),
        ("ab" * 32, None, bucket, [1]),
        ("ab" * 32, None, bucket, {"a": float("nan")}),
    ]
    for args in cases:
        with pytest.raises(NodeFormatError) as fast:
            Node.from_parsed(*args)
        with pytest.raises(NodeFormatError) as careful:
            Node(*args)
        assert str(fast.value) == str(careful.value)


@given(
    st.dictionaries(
        st.one_of(st.sampled_from(["a", "\u00e9", "\ud800", ""]), st.integers(0, 1)),
        st.one_of(_LEAVES, st.lists(_LEAVES, max_size=3), _VALUES),
        max_size=4,
    )
)
def test_quick_metadata_test_is_a_subset_of_plain_json(metadata: dict[Any, Any]) -> None:
    """The quick test of the usual metadata shape says yes only where ``plain_json`` keeps the
    value as it is (anything else goes to ``plain_json``), and says yes to the usual shape."""
    from merkle_memory.dag._node import _plain_metadata

    if _plain_metadata(metadata):
        assert plain_json(metadata, "v") is metadata
    usual = {"source": "claude-code", "uuids": ["u1"], "lines": [3], "is_sidechain": False}
    assert _plain_metadata(usual)


def test_the_blank_draft_holds_every_fields_default() -> None:
    """``from_parsed`` starts from ``blocks._blank()``, written out field by field for speed:
    it must hold exactly the constructor's defaults, for every field, so that a field added
    or a default changed in ``ContentBlock`` cannot be missed there."""
    import dataclasses

    from merkle_memory import blocks

    draft = blocks._blank()
    defaults = {f.name: f.default for f in dataclasses.fields(ContentBlock) if f.name != "type"}
    assert {name: getattr(draft, name) for name in defaults} == defaults
    assert dict(blocks._DEFAULTS) == defaults
    assert draft.type == ""
    assert ContentBlock.from_parsed("text") == ContentBlock("text")
