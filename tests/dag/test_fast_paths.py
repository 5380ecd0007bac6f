"""Fast paths of the block model checked against their careful references (issue 15 item 4):
``plain_json`` against ``json_copy``, ``ContentBlock.from_parsed`` against the constructor,
``normalize_whitespace`` against tapes' three regular-expression steps."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from merkle_memory._json import MAX_VALUE_DEPTH, json_copy, plain_json
from merkle_memory.dag import ContentBlock
from merkle_memory.errors import ContentBlockError
from merkle_memory.projection import GO_SPACE, normalize_whitespace

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


def test_normalize_whitespace_long_newline_run() -> None:
    """A run of 100,000 newlines collapses in a few passes to one."""
    assert normalize_whitespace("a" + "\n" * 100_000 + "b") == "a\nb"
