"""The fast path of canonical.loads gives exactly the careful path's value, or its exact error.

``_decode.loads_reference`` is the careful (reference) implementation; ``canonical.loads`` is
the fast path that proves some conditions absent with byte counts and falls back to the
reference otherwise. These tests compare the two on valid, mutated and hostile texts: same
value with the same types all the way down, or the same error class with the same message.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from merkle_memory import canonical
from merkle_memory.canonical import _decode
from merkle_memory.errors import CanonicalizationError, DuplicateKeyError, NestingDepthError

MAX = canonical.MAX_SAFE_INTEGER
DEPTH = canonical.MAX_DEPTH


def outcome(function: Any, data: Any) -> tuple[str, Any]:
    """("ok", value with types) or ("error", (class, message, args)) of ``function(data)``."""
    try:
        value = function(data)
    except Exception as exc:
        return "error", (type(exc), str(exc), exc.args)
    return "ok", typed(value)


def typed(value: Any) -> list[Any]:
    """``value`` as a flat pre-order list of nodes tagged by exact type (1 == 1.0 == True must
    not pass); iterative, so 512-deep values need no recursion."""
    out: list[Any] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out.append(("dict", list(item)))
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            out.append(("list", len(item)))
            stack.extend(reversed(item))
        else:
            out.append((type(item).__name__, repr(item)))
    return out


def assert_same(data: Any) -> None:
    fast = outcome(canonical.loads, data)
    reference = outcome(_decode.loads_reference, data)
    assert fast == reference, data[:200] if isinstance(data, (bytes, str)) else data


# Pieces that trip each condition the fast path must prove absent, and near misses of each.
TOKENS = [
    *'[]{}",: \n\t\r',
    "0",
    "1",
    "-",
    ".",
    "e",
    "E",
    "+",
    "\\",
    '\\"',
    "\\\\",
    "\\u",
    "\\ud800",
    "\\uD83D\\uDE00",
    "\\udc00",
    "\\u003a",
    "\\u0000",
    '"a"',
    '"a":',
    '"a" :',
    '"":',
    '":"',
    '"\\":"',
    '"\\\\":',
    "9007199254740991",
    "9007199254740992",
    "9007199254740993",
    "1152921504606846976",
    "12345678901234567890",
    "0.12345678901234567890",
    "1e400",
    "1E+400",
    "1e-400",
    "1e99",
    "1e0400",
    "-0",
    "-0.0",
    "NaN",
    "Infinity",
    "-Infinity",
    "true",
    "null",
    "é",
    "\U0001f600",
    "\ud800",
    "\ufeff",
    "\x00",
    "[" * 300,
    "]" * 300,
    "{" * 10,
]
JSON_SOUP = st.lists(st.sampled_from(TOKENS), max_size=30).map("".join)
KEYS = st.sampled_from(["a", "b", "", "a:b", 'q"', "\\", ":", " :", "e000", "0" * 16, "\u00e9"])
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(10**20), 10**20)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | KEYS
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(KEYS, inner, max_size=5),
    max_leaves=20,
)


def pretty(value: Any, style: int) -> str:
    """Several spellings of a value: compact, spaced, indented, ASCII-escaped, canonical."""
    if style == 0:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    if style == 1:
        return json.dumps(value)
    if style == 2:
        return json.dumps(value, indent=1, separators=(" , ", " : "))
    try:
        return canonical.dumps(value).decode()
    except CanonicalizationError:
        return json.dumps(value, ensure_ascii=True)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A JSON text of a random value, then possibly an object with a key repeated, a piece
    inserted, deleted or replaced, and whitespace around it."""
    text = pretty(draw(VALUES), draw(st.integers(0, 3)))
    if text.startswith("{") and len(text) > 2 and draw(st.booleans()):
        key = json.dumps(draw(KEYS))
        text = "{" + key + ":1," + text[1:-1] + ("," if text != "{}" else "") + key + ":2}"
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 3))
        piece = draw(st.sampled_from(TOKENS))
        text = text[:at] + (piece if draw(st.booleans()) else "") + text[at + cut :]
    return (
        draw(st.sampled_from(["", " ", "\n", "\t \r\n"]))
        + text
        + draw(st.sampled_from(["", " ", "\n", " x", ","]))
    )


@settings(max_examples=1500, deadline=None)
@given(mutated() | JSON_SOUP)
def test_fast_path_equals_reference_on_texts(text: str) -> None:
    """Valid, mutated and token-soup texts: same value and types, or same error and message,
    given as str and as UTF-8 bytes."""
    assert_same(text)
    assert_same(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=80))
def test_fast_path_equals_reference_on_arbitrary_bytes(data: bytes) -> None:
    """Arbitrary bytes (invalid UTF-8, BOMs, junk): the same outcome as the reference."""
    assert_same(data)
    assert_same(bytearray(data))


@settings(max_examples=200, deadline=None)
@given(VALUES, st.integers(0, 3))
def test_fast_path_equals_reference_on_valid_json(value: Any, style: int) -> None:
    """Every spelling of a value: the same outcome (duplicates, big numbers and all)."""
    assert_same(pretty(value, style).encode())


@pytest.mark.parametrize(
    "text",
    [
        '{"a":1,"a":2}',
        '{"a" :1, "a": 2}',
        '{"a"\n:1,"a"\t:2}',
        '{"x":"\\":\\":","a":1,"a":2}',
        '{"\\\\":1,"\\\\":2}',
        '{"a":":","a":1}',
        '{"a":{"b":1,"b":2}}',
        '[{"k":1},{"k":1,"k":1}]',
        '{"a":1,"\\u0061":2}',
        '{"a":"x ? y : z","b":1}',
        '{"a":"\\u003a","a":1}',
        "[" * DEPTH + "]" * DEPTH,
        "[" * (DEPTH + 1) + "]" * (DEPTH + 1),
        "[" + "[]," * 600 + "[" * (DEPTH - 1) + "]" * (DEPTH - 1) + "]",
        "[" + "[]," * 600 + "[" * DEPTH + "]" * DEPTH + "]",
        '["' + "[" * 600 + '",' + "[" * (DEPTH - 1) + "]" * (DEPTH - 1) + "]",
        '["' + "]" * 600 + '",' + "[" * DEPTH + "]" * DEPTH + "]",
        "[" + "{}," * 700 + "{}]",
        "[9007199254740991,-9007199254740991,9007199254740992,1e21]",
        "[9007199254740993]",
        "[0.1234567890123456789012345678901234]",
        "[1.5, 12345678901234567.5]",
        '["deadbeefe000", 1]',
        "[1e308, 1e309]",
        "[1E+308]",
        "[1e-999]",
        "[NaN]",
        "[-Infinity]",
        '["\\ud800"]',
        '{"\\udfff":1}',
        '["\\\\ud800"]',
        '["\\ud83d\\ude00"]',
        "\ufeff[]",
        "[] x",
        "[]\n",
        " []",
        "",
        "1" * 5000,
    ],
)
def test_fast_path_equals_reference_on_known_cases(text: str) -> None:
    """Hand-picked near misses of every proof the fast path makes."""
    assert_same(text)
    assert_same(text.encode("utf-8", "surrogatepass"))


def test_fast_path_never_recursion_error() -> None:
    """Far too deep texts give NestingDepthError on both paths, never a RecursionError."""
    for text in ["[" * 100_000, "[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000]:
        assert outcome(canonical.loads, text)[1][0] is NestingDepthError
        assert_same(text)


def test_key_counts_are_per_thread() -> None:
    """Threads parsing at once get their own key counts (a duplicate is never missed)."""
    good = json.dumps({f"k{i}": {"x": i} for i in range(200)}).encode()
    bad = good[:-1] + b', "k0": 1}'
    failures: list[str] = []

    def worker() -> None:
        for _ in range(200):
            if canonical.loads(good) != json.loads(good):
                failures.append("good")
            try:
                canonical.loads(bad)
            except DuplicateKeyError:
                continue
            failures.append("bad accepted")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_busy_scanner_falls_back_to_the_careful_path() -> None:
    """When this thread's counting scanner is busy (a parse inside a parse), the careful path
    answers, with the same values and errors."""
    scan = _decode._per_thread.scan
    scanner = _decode._make_counting_scan()
    assert scanner('{"a":{"b":1}}', False, False) == ({"a": {"b": 1}}, 13, 2, 2)
    assert scanner('[{"a":{"b":1}}]', True, True) == ([{"a": {"b": 1}}], 15, 2, 2)
    _decode._per_thread.scan = lambda text, checked, by_pairs: None
    try:
        assert canonical.loads(b'[{"a":[{"b":1}]}, {}]') == [{"a": [{"b": 1}]}, {}]
        with pytest.raises(DuplicateKeyError):
            canonical.loads(b'[{"b":{"a":1,"a":2}}, {}]')
    finally:
        _decode._per_thread.scan = scan


_HEX_BYTES = [bytes([c]) for c in b"89abcdefABCDEF"]


def escapes_surrogate(raw: bytes) -> bool:
    """Reference for _surrogate_escape: read ``raw`` left to right as JSON escapes do (a
    backslash and the byte after it form one escape) and say whether one of them starts
    ``\\u`` + "d"/"D" + one of 89abcdefABCDEF."""
    i = 0
    while i < len(raw):
        if raw[i] == 0x5C:
            if raw[i + 1 : i + 3] in (b"ud", b"uD") and raw[i + 3 : i + 4] in _HEX_BYTES:
                return True
            i += 2
        else:
            i += 1
    return False


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(["\\", "u", "d", "D", "8", "f", "0", "c", "a", '"', " "]), max_size=24
    ).map("".join)
)
def test_surrogate_escape_scan_equals_reading_escapes(text: str) -> None:
    """The fast path's surrogate-escape test (backslash runs counted at each hit) says what
    reading the escapes left to right says, on any backslash soup ("\\\\" never starts one)."""
    raw = text.encode()
    assert _decode._surrogate_escape(raw) == escapes_surrogate(raw)


@pytest.mark.parametrize(
    "raw", [b"\\ud\\\\d", b"\\\\ud800", b"\\\\\\ud800", b"\\u\\ud800", b"\\ud8"]
)
def test_surrogate_escape_known_cases(raw: bytes) -> None:
    """Escaped backslashes before "ud800" and escapes split by a backslash, in both modes."""
    expected = escapes_surrogate(raw)
    assert _decode._surrogate_escape(raw) == expected
    assert _decode._surrogate_escape(raw, 0, None, True) == expected


# --- Long texts (issue 15, read side, third pass) ------------------------------------------
#
# Texts longer than 2 * MAX_DEPTH bytes are sampled in the middle: few colons select the
# per-object pairs check, few digits as well the checked number callbacks (no number shape);
# a sample dense in backslashes selects the backslash-free surrogate pattern. The depth is
# proven from the hook's counts ((bytes - 3 * keys) / 2) or the "[" bytes. These tests pad
# texts so that each branch runs, and aim at each shortcut.

PADDING = {
    "letters": "lorem ipsum dolor sit amet " * 60,
    "backslashes": '\\"\\\\ ab\\\\u\\\\d8 \\n\\t' * 80,
    "colons": "a:b:c:d " * 200,
    "digits": "0123456789 " * 150,
    "mixed": "Note: see https://x.y/z?a=1 line 42 \\n" * 40,
}


def padded(core: str, padding: str, where: int = 1) -> str:
    """``core`` (a JSON value) in an array with a long string before (0), after (2) or on both
    sides of it (1), so that the text is long and the middle sample lands in the padding."""
    pad = json.dumps(padding)[1:-1]
    if where == 0:
        return '["' + pad + '",' + core + "]"
    if where == 2:
        return "[" + core + ',"' + pad + '"]'
    return '["' + pad + '",' + core + ',"' + pad + '"]'


# A number's integer part can follow each of these outside strings; 16 digits after any of
# them must select the checked callbacks.
AFTER = ["[", "[1,", '{"a":', '{"a": ', "[-", "[\n", "[\t", "[\r", "[ "]


@pytest.mark.parametrize("before", AFTER)
@pytest.mark.parametrize(
    "digits",
    ["123456789012345", "1234567890123456", "9007199254740993", "9007199254740992", "1" * 400],
)
def test_integer_parts_after_every_separator(before: str, digits: str) -> None:
    """15 digits pass, 16+ go to the checked callbacks, whatever byte precedes the integer part
    (short and long texts)."""
    closing = "}" if before.startswith("{") else "]"
    text = before + digits + closing
    assert_same(text)
    assert_same(text.encode())
    for padding in ("letters", "digits", "colons"):
        assert_same(padded(text, PADDING[padding]).encode())


@pytest.mark.parametrize(
    "text",
    [
        "1234567890123456",
        "9007199254740993",
        "12345678901234567890",
        " 1234567890123456",
        "\n9007199254740993\n",
        "123456789012345",
        "-1234567890123456",
        "[0.12345678901234567890123456789012345678901234567890]",
        "[1.1234567890123456e5]",
        "[1234567890123456.5]",
        "[1e400]",
        "[1E+400]",
        "[1e+21]",
        "[1e-400]",
        "[1e0400]",
        "[1e-0000000000000000001]",
        "[1e00000000000000001]",
        "[5e-324, 1.7976931348623157e308, 1.8e308]",
        '{"1234567890123456":1}',
        '{"e000":1,"x":"1e400"}',
        '["1234567890123456", "e000", "\\u0031e400"]',
        '{"a":"b","a":"c","n":1e400}',
    ],
)
def test_number_shape_near_misses(text: str) -> None:
    """Number literals at the edges of the number-shape proof, and look-alikes in strings and
    keys: same value or error as the careful path, short and padded."""
    assert_same(text)
    assert_same(text.encode())
    for padding in PADDING.values():
        assert_same(padded(text, padding))


SURROGATE_CASES = [
    '"\\ud800"',
    '"\\uD800"',
    '"\\udfff"',
    '"x\\udbff"',
    '"\\\\ud800"',
    '"\\\\\\ud800"',
    '"\\\\\\\\ud800"',
    '"\\\\\\\\\\ud800"',
    '"\\ud83d\\ude00"',
    '"\\ud83d\\\\ude00"',
    '"\\u00d8"',
    '"\\ud7ff"',
    '"\\ue000"',
    '{"\\udc00":1}',
    '{"k\\\\":"\\ud800"}',
]


@pytest.mark.parametrize("core", SURROGATE_CASES)
@pytest.mark.parametrize("where", [0, 1, 2])
def test_surrogate_escapes_anywhere(core: str, where: int) -> None:
    """Lone-surrogate escapes (and escaped backslashes before "ud800") at the start, middle and
    end of long texts, with few or many backslashes in the sample: the careful path's answer."""
    assert_same(core)
    for padding in PADDING.values():
        assert_same(padded(core, padding, where))
        assert_same(padded(core, padding, where).encode())


def test_surrogate_escape_at_the_last_backslash() -> None:
    """The search region ends 6 bytes after the last backslash: an escape that is the last
    backslash of the text is still seen."""
    for padding in PADDING.values():
        pad = json.dumps(padding.replace("\\", "/"))
        for tail in ('"\\ud800"]', '"\\udfff"]', '"\\\\ud800"]', '"\\ud83d\\ude00"]'):
            assert_same("[" + pad + "," + tail)
            assert_same("[" + tail.rstrip("]") + "," + pad + "]")


@pytest.mark.parametrize("padding", sorted(PADDING))
def test_duplicate_keys_hidden_in_long_texts(padding: str) -> None:
    """Repeated keys deep inside long string-heavy texts (checked pair by pair) and long
    object-dense texts (counted): DuplicateKeyError as on the careful path."""
    for core in [
        '{"x":{"y":{"k":1,"k":2}}}',
        '[{"k":1},{"k":1,"j":[{"a":1,"a":1}]}]',
        '{"a":1,"\\u0061":2}',
        '{"a":"\\":\\"","a":1}',
        '{"a" : 1, "b": {"a": 2, "a": 3}}',
    ]:
        text = padded(core, PADDING[padding])
        assert outcome(canonical.loads, text)[1][0] is DuplicateKeyError
        assert_same(text)


@pytest.mark.parametrize(
    "text",
    [
        '{"":' * DEPTH + "1" + "}" * DEPTH,
        '{"":' * (DEPTH + 1) + "1" + "}" * (DEPTH + 1),
        '{"a":' * (DEPTH + 1) + "1" + "}" * (DEPTH + 1),
        '{"":[' * (DEPTH // 2) + "1" + "]}" * (DEPTH // 2),
        '{"":[' * (DEPTH // 2) + "[1]" + "]}" * (DEPTH // 2),
        '{"k":' + "[" * (DEPTH - 1) + "]" * (DEPTH - 1) + "}",
        '{"k":' + "[" * DEPTH + "]" * DEPTH + "}",
        "[" + '{"a":1,"b":2,"c":3},' * 300 + "[" * DEPTH + "]" * DEPTH + "]",
        "[" + '{"a":1,"b":2,"c":3},' * 300 + "[" * (DEPTH - 1) + "]" * (DEPTH - 1) + "]",
    ],
)
def test_depth_bound_from_key_counts(text: str) -> None:
    """Nesting at and just past MAX_DEPTH where (bytes - 3 * keys) / 2 is just above or below
    the limit: '{"":' nests a level in 4 bytes with one key, the tightest the bound allows."""
    assert_same(text)
    assert_same(text.encode())
    for where in (0, 1, 2):  # the sample in the padding (pairs checked) or in the core
        assert_same(padded(text, PADDING["letters"], where))
        assert_same(padded(text, PADDING["backslashes"], where))


@st.composite
def long_texts(draw: st.DrawFn) -> str:
    """A JSON text padded past 2 * MAX_DEPTH bytes with a chosen filler, then possibly a key
    repeated and pieces inserted (at the middle, where the sample is taken, or anywhere)."""
    core = pretty(draw(VALUES), draw(st.integers(0, 3)))
    if core.startswith("{") and len(core) > 2 and draw(st.booleans()):
        key = json.dumps(draw(KEYS))
        core = "{" + key + ":1," + core[1:-1] + ("," if core != "{}" else "") + key + ":2}"
    padding = PADDING[draw(st.sampled_from(sorted(PADDING)))]
    text = padded(core, padding, draw(st.integers(0, 2)))
    for _ in range(draw(st.integers(0, 3))):
        middle = len(text) // 2
        at = draw(st.integers(0, len(text)) | st.integers(max(0, middle - 140), middle + 140))
        cut = draw(st.integers(0, 3))
        piece = draw(st.sampled_from(TOKENS))
        text = text[:at] + (piece if draw(st.booleans()) else "") + text[at + cut :]
    return text


@settings(max_examples=600, deadline=None)
@given(long_texts())
def test_fast_path_equals_reference_on_long_texts(text: str) -> None:
    """Long padded texts (each sampling branch: few or many digits, colons, backslashes),
    valid and mutated: same value and types, or the same error, as str and as bytes."""
    assert_same(text)
    assert_same(text.encode("utf-8", "surrogatepass"))


@settings(max_examples=400, deadline=None)
@given(
    st.lists(
        st.sampled_from(["\\", "u", "d", "D", "8", "f", "0", "c", "a", '"', " "]), max_size=24
    ).map("".join),
    st.booleans(),
)
def test_surrogate_escape_search_in_both_modes(text: str, dense: bool) -> None:
    """Both search modes (the careful pattern, or what follows a backslash in texts dense in
    backslashes), limited to the first..last backslash region as loads calls them, say what
    reading the escapes left to right says."""
    raw = text.encode()
    first, last = raw.find(b"\\"), raw.rfind(b"\\") + 6
    found = first >= 0 and _decode._surrogate_escape(raw, first, last, dense)
    assert found == escapes_surrogate(raw)


class _LyingStr(str):
    """A ``str`` subclass whose methods misreport its characters."""

    def encode(self, *args: Any, **kwargs: Any) -> bytes:  # type: ignore[override]
        return b'{"a":1}'

    def __len__(self) -> int:
        return 3


class _LyingBytes(bytes):
    """A ``bytes`` subclass whose methods misreport its bytes."""

    def decode(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        return '{"a":1}'

    def __bytes__(self) -> bytes:
        return b'{"a":1}'

    def count(self, *args: Any) -> int:  # type: ignore[override]
        return 0


@pytest.mark.parametrize(
    "text",
    ['{"a":1,"a":2}', "[" * 600 + "]" * 600, "[1] x", '{"b":[1.5,"\\ud800"]}', '[1, {"c": 2}]'],
)
def test_subclassed_input_is_read_by_its_characters_not_its_methods(text: str) -> None:
    """A ``str``, ``bytes`` or ``bytearray`` subclass gives exactly what its base value gives
    (value or error class) on both paths: no overridden method is called (found by a review:
    the fast path took a lying ``encode`` or ``__len__`` at its word)."""
    expected = outcome(_decode.loads_reference, text)
    for data in (_LyingStr(text), _LyingBytes(text.encode()), bytearray(text.encode())):
        assert outcome(_decode.loads, data) == expected
        assert outcome(_decode.loads_reference, data) == expected
        assert outcome(canonical.loads, data) == expected
