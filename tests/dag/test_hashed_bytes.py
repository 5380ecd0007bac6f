"""``Bucket.hashed_bytes`` (each block projected and encoded in one pass, issue 15 item 4)
against its definition: ``canonical.dumps`` of ``Bucket.hashed_content()`` (DESIGN section 3),
and the string encoders it uses against ``canonical.dumps`` of the string.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from merkle_memory import canonical
from merkle_memory._json import MAX_VALUE_DEPTH
from merkle_memory.dag import Bucket, ContentBlock, node_digest, node_hash
from merkle_memory.dag._node import _name, _text
from merkle_memory.errors import MerkleMemoryError
from merkle_memory.projection import project_content
from merkle_memory.transcripts import import_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
from gen_transcript import generate


class _Text(str):
    """A ``str`` subclass: accepted by a block, refused by canonical JSON."""


_STRINGS = st.one_of(
    st.text(
        alphabet=st.sampled_from(
            ["a", " ", "\n", '"', "\\", "\x1f", "\u00e9", "\u2028", "\U0001f600", "<", ">"]
        ),
        max_size=12,
    ),
    st.sampled_from(
        [
            "",
            "<system-reminder>x</system-reminder>",
            "  \n\n keep \t\n",
            "a\ud800b",  # a lone surrogate, let through by from_parsed(surrogate_free=True)
            _Text("sub"),
        ]
    ),
)
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**53) + 1, 2**53 - 1),
    st.sampled_from(
        [0, 0.0, -0.0, 5.0, 1e21, 1e-7, 0.1, 123.456, 2.5e-5, 1e16, 9007199254740992.0]
    ),
    st.floats(allow_nan=False, allow_infinity=False),
    _STRINGS,
)
_KEYS = st.sampled_from(["a", "b", "", "\u00e9", "\U0001f600", "\uffff", "replace_all", "z"])
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=10,
)


def _deep(depth: int) -> Any:
    """An object ``depth`` levels deep (``{"k": "leaf"}`` is one level)."""
    value: Any = "leaf"
    for _ in range(depth):
        value = {"k": value}
    return value


_BLOCK_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "text": _STRINGS,
        "image_url": _STRINGS,
        "image_base64": _STRINGS,
        "media_type": _STRINGS,
        "tool_use_id": _STRINGS,
        "tool_name": _STRINGS,
        "tool_input": st.dictionaries(_KEYS, _VALUES, max_size=4),
        "tool_result_id": _STRINGS,
        "tool_output": _STRINGS,
        "is_error": st.booleans(),
        "thinking": _STRINGS,
        "thinking_signature": _STRINGS,
        "content": _VALUES,
    },
)


def _block(kind: str, fields: dict[str, Any]) -> ContentBlock | None:
    try:  # surrogate_free=True lets a lone surrogate through to hashing on purpose
        return ContentBlock.from_parsed(kind, surrogate_free=True, **fields)
    except MerkleMemoryError:
        return None


def _reference(bucket: Bucket) -> bytes:
    """The definition, encoded as a whole without copying nested values (a value let through
    unchecked then fails in ``canonical.dumps``, as before the assembled form)."""
    blocks = [b.to_dict(copy=False) for b in project_content(bucket.content)]
    return canonical.dumps({"type": bucket.type, "role": bucket.role, "content": blocks})


def _outcome(func: Any) -> tuple[Any, ...]:
    try:
        return ("ok", func())
    except MerkleMemoryError as exc:
        return ("error", type(exc), str(exc))


@settings(max_examples=250, deadline=None)
@given(
    blocks=st.lists(
        st.tuples(st.sampled_from(["text", "tool_use", "tool_result", "x\u00e9"]), _BLOCK_FIELDS),
        max_size=4,
    ),
    role=st.sampled_from(["user", "assistant", "r\u00e9le", _Text("user"), "a\ud800"]),
    kind=st.sampled_from(["message", _Text("message")]),
)
def test_hashed_bytes_equal_canonical_dumps_of_hashed_content(
    blocks: list[tuple[str, dict[str, Any]]], role: str, kind: str
) -> None:
    """Any bucket: ``hashed_bytes()`` is ``canonical.dumps`` of the hashed content byte for
    byte, or raises the same error (a lone surrogate, a ``str`` subclass); the node id is the
    digest of the whole preimage."""
    made = [_block(k, fields) for k, fields in blocks]
    try:
        bucket = Bucket(kind, role, tuple(b for b in made if b is not None))
    except MerkleMemoryError:
        return
    expected = _outcome(lambda: _reference(bucket))
    assert _outcome(bucket.hashed_bytes) == expected
    if expected[0] == "ok":
        parent = "ab" * 32
        reference = canonical.digest({"content": bucket.hashed_content(), "parent": parent})
        assert node_hash(bucket, parent) == reference
        assert node_digest(expected[1], None) == canonical.digest(
            {"content": bucket.hashed_content(), "parent": ""}
        )


def test_hashed_bytes_of_known_blocks() -> None:
    """A hand-checked bucket: members sorted, empties and the signature left out, tags cut."""
    bucket = Bucket(
        "message",
        "assistant",
        (
            ContentBlock("thinking", thinking="hm", thinking_signature="sig"),
            ContentBlock("text", text="<system-reminder>x</system-reminder>"),  # dropped
            ContentBlock(
                "tool_use",
                tool_use_id="t1",
                tool_name="Edit",
                tool_input={"z": 1.0, "a": [1e21, "\u00e9"], "replace_all": False},
            ),
        ),
    )
    assert bucket.hashed_bytes() == (
        b'{"content":[{"is_error":false,"thinking":"hm","type":"thinking"},'
        b'{"is_error":false,"tool_input":{"a":[1e+21,"\xc3\xa9"],"z":1},"tool_name":"Edit",'
        b'"tool_use_id":"t1","type":"tool_use"}],"role":"assistant","type":"message"}'
    )
    assert bucket.hashed_bytes() == canonical.dumps(bucket.hashed_content())


def test_depth_limit_is_the_whole_values() -> None:
    """A ``tool_input`` 508 levels deep (the block's limit) sits 511 deep in the hashed form
    and is encoded; the bytes equal the definition's."""
    for depth in (MAX_VALUE_DEPTH - 1, MAX_VALUE_DEPTH):
        bucket = Bucket("message", "user", (ContentBlock("tool_use", tool_input=_deep(depth)),))
        assert bucket.hashed_bytes() == _reference(bucket)
        assert bucket.hashed_bytes().count(b"{") == depth + 2


_TEXT_CHARS = st.sampled_from(
    [
        "a",
        " ",
        "\n",
        "\n",
        "\t",
        "\r",
        '"',
        "\\",
        "\x00",
        "\x08",
        "\x0b",
        "\x0c",
        "\x1f",
        "\x7f",
        "\u00e9",
        "\u201c",
        "\u2028",
        "\U0001f600",
        "\ud800",
        "\udfff",
        "/",
        "<",
    ]
)


@settings(max_examples=500)
@given(st.one_of(st.text(_TEXT_CHARS, max_size=40), st.text(max_size=40)))
def test_text_and_name_encoders_equal_canonical_dumps(text: str) -> None:
    """``_text`` (a text with only newlines, or only short escapes, escaped on its UTF-8
    bytes, any other through the C escaper) is ``canonical.dumps`` of the string without its
    quotes, and ``_name`` (the same,
    remembered) with them; a lone surrogate fails to encode in both, which sends the whole
    bucket to ``canonical.dumps`` (that raises ``SurrogateError``)."""
    try:
        expected = canonical.dumps(text)
    except MerkleMemoryError:
        with pytest.raises(UnicodeEncodeError):
            _text(text)
        with pytest.raises(UnicodeEncodeError):
            _name(text)
        return
    assert b'"' + _text(text) + b'"' == expected
    assert _name(text) == expected
    assert _name(text) == expected  # remembered: the same bytes again


def test_text_encoder_known_values() -> None:
    """Hand-checked escapes: newlines only and short escapes only (the byte paths), and a
    control character beside them (the C escaper)."""
    assert _text("a\nb\n\u00e9") == b"a\\nb\\n\xc3\xa9"
    assert _text('\\"\t\r\b\f\n\u00e9') == b'\\\\\\"\\t\\r\\b\\f\\n\xc3\xa9'
    assert _text('say "hi"\n\\ \x01\t') == b'say \\"hi\\"\\n\\\\ \\u0001\\t'
    assert _text("\u2028\x7f") == "\u2028\x7f".encode()  # not escaped by RFC 8785


def test_realistic_session_hashed_bytes_equal_definition(tmp_path: Path) -> None:
    """Every node of a generated session with realistic content (tool results, edits,
    thinking blocks, todo lists, non-ASCII text) has hashed bytes equal to the definition."""
    path = tmp_path / "session.jsonl"
    with open(path, "w", encoding="utf-8") as handle:
        generate(handle, 300, 7, "realistic")
    nodes = import_file(path, "claude-code").nodes
    assert len(nodes) == 300
    for node in nodes:
        assert node.bucket.hashed_bytes() == _reference(node.bucket)
        assert node.hash == canonical.digest(
            {"content": node.bucket.hashed_content(), "parent": node.parent_hash or ""}
        )


def test_a_content_emptied_after_construction_hashes_as_the_definition() -> None:
    """A block's held ``content`` emptied by its caller (outside the contract, found by a
    review): the one-pass bytes still equal ``canonical.dumps`` of ``hashed_content()``,
    which drops the empty value, instead of writing ``"content":[]``."""
    for held in ([1], {"k": 1}):
        block = ContentBlock("tool_result", content=held)
        block.content.clear()
        bucket = Bucket("message", "user", (block,))
        expected = (
            b'{"content":[{"is_error":false,"type":"tool_result"}],"role":"user","type":"message"}'
        )
        assert bucket.hashed_bytes() == expected
        assert canonical.dumps(bucket.hashed_content()) == expected


def test_a_tool_input_changed_after_construction_gives_the_definitions_error() -> None:
    """A dict subclass put into a block's held ``tool_input`` after construction (outside the
    contract, found by a review): the one-pass hash raises what ``canonical.dumps`` of the
    projected blocks as they are held raises, instead of hashing the plain-dict copy that
    pruning made of it. (``hashed_content()`` copies nested values, so it holds plain dicts.)"""
    from collections import OrderedDict

    from merkle_memory.errors import UnsupportedTypeError

    block = ContentBlock("tool_use", tool_input={"a": {"b": 1}})
    assert block.tool_input is not None
    block.tool_input["a"] = OrderedDict(b=1)  # type: ignore[index]
    bucket = Bucket("message", "assistant", (block,))
    held = [b.to_dict(copy=False) for b in project_content(bucket.content)]
    with pytest.raises(UnsupportedTypeError):
        canonical.dumps({"content": held, "role": "assistant", "type": "message"})
    with pytest.raises(UnsupportedTypeError):
        bucket.hashed_bytes()
