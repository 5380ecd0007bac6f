"""Tests of merkle_memory.projection (DESIGN section 3; tapes ProjectContent rules)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import assume, given
from hypothesis import strategies as st
from support import asset_path

from merkle_memory import canonical
from merkle_memory.dag import Bucket, ContentBlock, node_hash
from merkle_memory.projection import (
    HARNESS_TAGS,
    normalize_whitespace,
    project_content,
    prune_tool_input,
    strip_tags,
)


def _significant(block: dict[str, Any]) -> dict[str, Any]:
    """A block dict without empty values and without a false is_error (the vectors' form)."""
    return {
        k: v
        for k, v in block.items()
        if v not in ("", None, {}, []) and not (k == "is_error" and v is False)
    }


def _text(text: str) -> ContentBlock:
    return ContentBlock("text", text=text)


def _project_text(text: str) -> list[dict[str, Any]]:
    return [b.to_dict() for b in project_content([_text(text)])]


# --- known-answer vectors ------------------------------------------------------------------


def test_projection_cases_vectors() -> None:
    """Every case of vectors/tapes/projection_cases.json projects to its expected blocks."""
    cases = json.loads(asset_path("tapes", "projection_cases.json").read_text())
    assert len(cases["cases"]) >= 10
    for case in cases["cases"]:
        blocks = [ContentBlock.from_dict(b) for b in case["input"]]
        got = [_significant(b.to_dict()) for b in project_content(blocks)]
        assert got == case["expect"], case["id"]


def test_node_vectors() -> None:
    """node_hash reproduces the preimage bytes and hashes of vectors/tapes/node_vectors.json."""
    vectors = json.loads(asset_path("tapes", "node_vectors.json").read_text())
    for vector in vectors["nodes"]:
        bucket = Bucket.from_dict(
            {"type": vector["type"], "role": vector["role"], "content": vector["content"]}
        )
        assert node_hash(bucket, vector["parent"]) == vector["hash"], vector["name"]
        if "preimage" in vector:
            preimage = {"parent": vector["parent"] or "", "content": bucket.hashed_content()}
            assert canonical.dumps(preimage).decode() == vector["preimage"]


def test_harness_tags_exact_order() -> None:
    """HARNESS_TAGS is the DESIGN's list, in its order."""
    assert HARNESS_TAGS == (
        "system-reminder",
        "command-name",
        "command-message",
        "command-args",
        "local-command-stdout",
        "local-command-stderr",
        "local-command-caveat",
        "session",
        "conversation",
        "new-diagnostics",
        "task-notification",
        "status",
        "summary",
        "transcript",
        "event",
        "tool-use-id",
        "output-file",
        "task-id",
        "environment_context",
    )


# --- one test per rule ---------------------------------------------------------------------


def test_every_tag_stripped() -> None:
    """Each harness tag's section is removed, leaving only the text around it."""
    text = "".join(f"<{t}>drop-{t}</{t}>\n" for t in HARNESS_TAGS) + "keep"
    assert _project_text(text) == [{"type": "text", "is_error": False, "text": "keep"}]


def test_unclosed_tag_removes_rest() -> None:
    """An open tag without a close removes everything after it."""
    assert strip_tags("a<status>b\nc") == "a"


def test_same_name_nesting() -> None:
    """<a><a>x</a>y</a> cuts to the first close, leaving 'y</a>'."""
    assert strip_tags("<status><status>x</status>y</status>") == "y</status>"


def test_attribute_variant_not_matched() -> None:
    """<tag attr="x"> and <tag > are not the literal open marker, so they stay."""
    text = '<system-reminder kind="x">keep</system-reminder>'
    assert strip_tags(text) == text
    assert strip_tags("<system-reminder >keep</system-reminder>") == (
        "<system-reminder >keep</system-reminder>"
    )


def test_case_sensitive() -> None:
    """Tag matching is case-sensitive."""
    assert strip_tags("<System-Reminder>x</System-Reminder>") == (
        "<System-Reminder>x</System-Reminder>"
    )


def test_stray_closing_tag_kept() -> None:
    """A close marker with no open marker before it stays in the text."""
    assert strip_tags("a</summary>b<summary>x</summary>c") == "a</summary>bc"


def test_cut_can_form_a_new_tag() -> None:
    """A cut that joins two halves of an open marker is found by searching again."""
    assert strip_tags("<sta<status>x</status>tus>gone</status>ok") == "ok"
    # A later tag pass cannot re-open an earlier tag: passes run once each, in order.
    assert strip_tags("<sys<status>x</status>tem-reminder>y</system-reminder>") == (
        "<system-reminder>y</system-reminder>"
    )


def test_different_tags_nested() -> None:
    """Nesting of different tags is removed because each tag makes its own pass."""
    assert strip_tags("<session>a<status>b</status>c</session>d") == "d"


def test_crlf_and_lone_cr() -> None:
    """CRLF becomes LF; a lone CR is kept (inside the text)."""
    assert normalize_whitespace("a\r\nb") == "a\nb"
    assert normalize_whitespace("a\rb") == "a\rb"
    assert normalize_whitespace("a \t\r\nb") == "a\nb"


def test_spaces_before_newline_and_newline_runs() -> None:
    """Spaces/tabs before a newline go, newline runs collapse, inner spaces stay."""
    assert normalize_whitespace("a  b \t\n\n\n c") == "a  b\n c"


def test_information_separators_kept() -> None:
    """U+001C..U+001F are not Go spaces, so they survive trimming (str.strip removes them)."""
    for ch in "\x1c\x1d\x1e\x1f":
        assert normalize_whitespace(f"{ch}a{ch}") == f"{ch}a{ch}"


def test_unicode_spaces_trimmed() -> None:
    """U+0085, U+00A0, U+3000 (and the other Go spaces) are trimmed at both ends."""
    for ch in "\u0085\u00a0\u3000\u1680\u2000\u200a\u2028\u2029\u202f\u205f\v\f":
        assert normalize_whitespace(f"{ch}a b{ch}") == "a b"
    assert normalize_whitespace("\u200bx") == "\u200bx"  # zero-width space is not a space


def test_tool_input_pruning() -> None:
    """Zero values are pruned recursively through objects, emptied objects go, lists stay."""
    given_input = {
        "keep": "x",
        "f": False,
        "e": "",
        "z": 0,
        "zf": 0.0,
        "n": None,
        "l": [],
        "t": True,
        "one": 1,
        "nested": {"off": False, "deep": {"gone": 0}, "on": True},
        "empty": {},
        "all_zero": {"a": None, "b": {"c": ""}},
        "list": [{"f": False}, 0, ""],
    }
    assert prune_tool_input(given_input) == {
        "keep": "x",
        "t": True,
        "one": 1,
        "nested": {"on": True},
        "list": [{"f": False}, 0, ""],
    }
    block = ContentBlock("tool_use", tool_use_id="t", tool_name="X", tool_input={"f": False})
    assert project_content([block])[0].to_dict() == {
        "type": "tool_use",
        "is_error": False,
        "tool_use_id": "t",
        "tool_name": "X",
    }


def test_thinking_signature_removed_thinking_kept() -> None:
    """thinking_signature is removed; the thinking text is not normalized."""
    block = ContentBlock("thinking", thinking="  a\n\n\nb  ", thinking_signature="sig")
    (out,) = project_content([block])
    assert out.thinking == "  a\n\n\nb  "
    assert out.thinking_signature == ""


def test_tool_output_cleaned_block_kept() -> None:
    """tool_output is stripped and normalized; the block stays even when it becomes empty."""
    block = ContentBlock(
        "tool_result", tool_result_id="r", tool_output="out  \r\n<system-reminder>x", is_error=True
    )
    (out,) = project_content([block])
    assert out.to_dict() == {
        "type": "tool_result",
        "is_error": True,
        "tool_result_id": "r",
        "tool_output": "out",
    }
    empty = ContentBlock("tool_result", tool_result_id="r", tool_output="<status>x</status>")
    assert [b.to_dict() for b in project_content([empty])] == [
        {"type": "tool_result", "is_error": False, "tool_result_id": "r"}
    ]


def test_text_empty_block_dropped_whatever_type() -> None:
    """A block whose non-empty text projects to empty is dropped, even a tool_use."""
    block = ContentBlock(
        "tool_use", text="<system-reminder>x</system-reminder>", tool_use_id="t", tool_name="X"
    )
    assert project_content([block]) == []
    assert project_content([_text("  \n\t ")]) == []


def test_block_with_empty_text_kept() -> None:
    """A block whose text was empty from the start is kept (only non-empty text is checked)."""
    block = ContentBlock("image", image_url="https://example.org/x.png")
    assert project_content([block]) == [block]


def test_custom_tags() -> None:
    """The tags argument replaces the default list."""
    assert _significant(project_content([_text("<x>a</x>b")], tags=("x",))[0].to_dict()) == {
        "type": "text",
        "text": "b",
    }
    assert project_content([_text("<x>a</x>b")])[0].text == "<x>a</x>b"


# --- properties ----------------------------------------------------------------------------


def _naive_strip(text: str, tags: tuple[str, ...] = HARNESS_TAGS) -> str:
    """Reference: tapes' loop, restarting the search from the start after every cut."""
    for tag in tags:
        while True:
            i = text.find(f"<{tag}>")
            if i < 0:
                break
            j = text.find(f"</{tag}>", i + len(tag) + 2)
            if j < 0:
                text = text[:i]
                break
            text = text[:i] + text[j + len(tag) + 3 :]
    return text


_TAG_SOUP = st.lists(
    st.sampled_from(
        ["<status>", "</status>", "<sta", "tus>", "<summary>", "</summary>", "a", "\n", " ", "<"]
    ),
    max_size=30,
).map("".join)

_TEXTS = st.one_of(_TAG_SOUP, st.text(max_size=40))


@given(_TEXTS)
def test_strip_tags_matches_naive_reference(text: str) -> None:
    """The resuming search gives the same result as restarting from the start each time."""
    assert strip_tags(text) == _naive_strip(text)


_BLOCKS = st.lists(
    st.builds(
        ContentBlock,
        type=st.sampled_from(["text", "tool_use", "tool_result", "thinking"]),
        text=_TEXTS,
        tool_input=st.one_of(
            st.none(),
            st.dictionaries(
                st.text(max_size=3),
                st.recursive(
                    st.one_of(st.none(), st.booleans(), st.integers(-2, 2), st.text(max_size=2)),
                    lambda c: st.lists(c, max_size=2) | st.dictionaries(st.text(max_size=2), c),
                    max_leaves=5,
                ),
                max_size=4,
            ),
        ),
        tool_output=_TEXTS,
        thinking_signature=st.text(max_size=3),
    ),
    max_size=4,
)


def _reprojectable(blocks: list[ContentBlock]) -> bool:
    """No harness-tag opener and no CR left in any projected text (see the test below)."""
    texts = [t for b in blocks for t in (b.text, b.tool_output)]
    return not any("\r" in t or any(f"<{tag}>" in t for tag in HARNESS_TAGS) for t in texts)


@given(_BLOCKS)
def test_projection_idempotent(blocks: list[ContentBlock]) -> None:
    """Projecting a projection changes nothing, unless the first pass left a tag opener or a
    CR behind (then a second pass may cut more: see the next test)."""
    once = project_content(blocks)
    if _reprojectable(once):
        assert project_content(once) == once


def test_projection_not_idempotent_after_joining_cut() -> None:
    """As in tapes, a cut can join two pieces into an opener of a tag processed earlier,
    which the same pass does not revisit: '<sta<summary></summary>tus>' keeps '<status>'
    after one pass, and a second pass removes it (unclosed: the rest of the text goes)."""
    block = ContentBlock("tool_result", tool_output="<sta<summary></summary>tus>")
    once = project_content([block])
    assert once[0].tool_output == "<status>"
    assert project_content(once)[0].tool_output == ""


@given(_BLOCKS)
def test_projection_never_mutates_input(blocks: list[ContentBlock]) -> None:
    """The input blocks (including their tool_input dicts) are unchanged after projection."""
    before = [canonical.dumps(b.to_dict()) for b in blocks]
    inputs = [json.dumps(b.tool_input, sort_keys=True) for b in blocks]
    project_content(blocks)
    assert [canonical.dumps(b.to_dict()) for b in blocks] == before
    assert [json.dumps(b.tool_input, sort_keys=True) for b in blocks] == inputs


_LINE = st.text(
    alphabet=st.characters(blacklist_characters="\r\n<", blacklist_categories=("Cs",)),
    max_size=12,
)


@given(st.lists(_LINE, min_size=1, max_size=6), st.data(), st.text(max_size=20))
def test_reminder_between_lines_keeps_node_hash(
    lines: list[str], data: st.DataObject, noise: str
) -> None:
    """A <system-reminder> section inserted between lines of a text leaves the hash as is.

    (A text that is blank from the start is excluded: tapes keeps a block whose text was ""
    but drops one whose text projects to "", so those two hash differently by design.)
    """
    assume(normalize_whitespace("\n".join(lines)))
    at = data.draw(st.integers(0, len(lines)))
    reminder = "<system-reminder>" + noise.replace("</system-reminder>", "") + "</system-reminder>"
    noisy = [*lines[:at], reminder, *lines[at:]]
    clean = Bucket("message", "user", (_text("\n".join(lines)),))
    dirty = Bucket("message", "user", (_text("\n".join(noisy)),))
    assert node_hash(dirty, None) == node_hash(clean, None)
