"""The CLI's one rule for JSON output (``json_text``): strict UTF-8 with no lone surrogate;
a name's byte that is not UTF-8 (U+DC80..U+DCFF after ``os.fsdecode``) is written ``\\xNN``,
any other lone surrogate U+FFFD; everything else as ``json.dumps`` writes it."""

from __future__ import annotations

import json
import os

from hypothesis import given
from hypothesis import strategies as st

from merkle_memory.cli._output import json_text


def reference(value: str) -> str:
    """The expected string after a round trip, built one character at a time."""
    out = []
    for ch in value:
        code = ord(ch)
        if 0xDC80 <= code <= 0xDCFF:
            out.append(f"\\x{code - 0xDC00:02x}")
        elif 0xD800 <= code <= 0xDFFF:
            out.append("\ufffd")
        else:
            out.append(ch)
    return "".join(out)


def test_known_values() -> None:
    """Exact text for a name with 0xff, a lone high surrogate, and plain text."""
    name = os.fsdecode(b"bad\xff.jsonl")
    assert json_text({"path": name}) == '{\n  "path": "bad\\\\xff.jsonl"\n}\n'
    assert json_text(["\ud800x"]) == '[\n  "\ufffdx"\n]\n'
    assert json_text({"é": "a\\b"}) == '{\n  "é": "a\\\\b"\n}\n'


SURROGATES = st.integers(0xD800, 0xDFFF).map(chr)


@given(st.text(alphabet=st.one_of(st.characters(), SURROGATES)))
def test_any_string_round_trips_as_the_reference(value: str) -> None:
    """Any string, as key and value: the text encodes as strict UTF-8 and parses back to the
    reference mapping of each character."""
    text = json_text({value: [value]})
    text.encode("utf-8")
    assert json.loads(text) == {reference(value): [reference(value)]}
