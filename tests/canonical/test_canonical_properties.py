"""Hypothesis properties of canonical JSON over the whole accepted domain, against naive refs."""

from __future__ import annotations

import decimal
import json
import math
import re
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from merkle_memory import canonical
from merkle_memory.errors import CanonicalizationError

MAX = canonical.MAX_SAFE_INTEGER

# Any code point but surrogates: controls, BMP, astral.
CHARS = st.characters(blacklist_categories=("Cs",))
BMP_CHARS = st.characters(blacklist_categories=("Cs",), max_codepoint=0xFFFF)
FLOATS = st.floats(allow_nan=False, allow_infinity=False)  # includes subnormals and -0.0
INTS = st.integers(-MAX, MAX)
TEXT = st.text(CHARS, max_size=12)


def json_values(floats: bool = True, keys: st.SearchStrategy[str] = TEXT) -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | INTS | TEXT
    if floats:
        scalars = scalars | FLOATS
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=5)
            | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(keys, inner, max_size=5)
        ),
        max_leaves=15,
    )


def plain(value: Any) -> Any:
    """The value loads must give back: tuples become lists, numbers compare by value."""
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    return value


def utf16_units(key: str) -> list[int]:
    """Naive UTF-16 encoding by arithmetic (RFC 8785 §3.2.3 sorts on these units)."""
    units = []
    for char in key:
        code = ord(char)
        if code > 0xFFFF:
            code -= 0x10000
            units += [0xD800 + (code >> 10), 0xDC00 + (code & 0x3FF)]
        else:
            units.append(code)
    return units


def shortest_digits(value: float) -> tuple[str, int]:
    """Fewest significant digits that read back as ``value`` (> 0), by exhaustive search.

    Returns (digits without trailing zeros, n) with value ~ 0.digits x 10**n; of two
    candidates of the same length the one nearer the exact binary value wins (ES6 7.1.12.1).
    """
    exact = decimal.Decimal(value)
    for precision in range(1, 18):
        found = []
        for rounding in (decimal.ROUND_FLOOR, decimal.ROUND_CEILING):
            context = decimal.Context(prec=precision, rounding=rounding)
            candidate = context.plus(exact)
            if float(candidate) == value:
                found.append(candidate)
        if found:
            best = min(found, key=lambda c: (abs(c - exact), int(c.as_tuple().digits[-1]) % 2))
            _, digit_tuple, exponent = best.as_tuple()
            digits = "".join(map(str, digit_tuple)).rstrip("0")
            return digits, len(digit_tuple) + int(exponent)
    raise AssertionError(value)  # pragma: no cover - 17 digits always suffice


def naive_es6(value: float) -> str:
    """ES6 Number::toString (ECMA-262 7.1.12.1) step by step, on the shortest digits."""
    if value == 0:
        return "0"
    if value < 0:
        return "-" + naive_es6(-value)
    digits, n = shortest_digits(value)
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return "0." + "0" * -n + digits
    tail = "" if k == 1 else "." + digits[1:]
    return f"{digits[0]}{tail}e{'+' if n - 1 >= 0 else '-'}{abs(n - 1)}"


@settings(max_examples=150, deadline=None)
@given(json_values())
def test_dumps_loads_dumps_is_a_fixpoint(value: Any) -> None:
    """dumps(loads(dumps(x))) == dumps(x), and loads gives back x (tuples as lists)."""
    out = canonical.dumps(value)
    back = canonical.loads(out)
    assert canonical.dumps(back) == out
    assert back == plain(value)


@settings(max_examples=150, deadline=None)
@given(json_values(floats=False, keys=st.text(BMP_CHARS, max_size=8)))
def test_agrees_with_json_dumps_without_floats_and_astral_keys(value: Any) -> None:
    """Without floats and with BMP-only keys, RFC 8785 equals sorted compact json.dumps."""
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical.dumps(value) == expected.encode("utf-8")


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(TEXT, INTS, max_size=12))
def test_key_order_is_naive_utf16_order(value: dict[str, int]) -> None:
    """Top-level keys come out in the order of a naive UTF-16 code-unit sort."""
    out = canonical.dumps(value)
    order = json.loads(out, object_pairs_hook=lambda pairs: [key for key, _ in pairs])
    assert order == sorted(value, key=utf16_units)


@settings(max_examples=500, deadline=None)
@given(FLOATS)
def test_float_format_equals_naive_es6_reference(value: float) -> None:
    """format_number equals a naive ES6 formatter, round-trips, and dumps agrees on both paths."""
    text = canonical.format_number(value)
    assert text == naive_es6(value)
    assert float(text) == value
    assert canonical.dumps([value]) == canonical._dumps_reference([value]) == f"[{text}]".encode()


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**70), 2**70))
def test_integer_literals_follow_the_design_rule(number: int) -> None:
    """An integer literal parses to an int in range, else to the float whose ES6 form it is."""
    text = str(number)
    if abs(number) <= MAX:
        assert canonical.loads(text) == number
        return
    nearest = float(number)
    if canonical.format_number(nearest) == text:
        assert canonical.loads(text) == nearest
    else:
        try:
            canonical.loads(text)
        except CanonicalizationError as exc:
            assert type(exc).__name__ == "IntegerDomainError"
        else:  # pragma: no cover - the assertion documents the failure
            raise AssertionError(f"{text} was accepted")


JSONISH = st.text(
    st.sampled_from([*'[]{}",:0123456789.eE+- \n\\utrfalsenNIy', "\ud800", "é", "\x00"]),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=64) | JSONISH.map(lambda s: s.encode("utf-8", "surrogatepass")))
def test_loads_of_arbitrary_bytes_raises_only_our_errors(data: bytes) -> None:
    """Any bytes: loads returns a value that re-serializes, or raises a CanonicalizationError."""
    try:
        value = canonical.loads(data)
    except CanonicalizationError:
        return
    assert canonical.dumps(canonical.loads(canonical.dumps(value))) == canonical.dumps(value)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=40) | JSONISH)
def test_loads_of_arbitrary_text_raises_only_our_errors(text: str) -> None:
    """Any str (lone surrogates included): a value in the domain or a CanonicalizationError."""
    try:
        value = canonical.loads(text)
    except CanonicalizationError:
        return
    canonical.dumps(value)


def test_naive_references_are_sane() -> None:
    """The naive references give the RFC's own examples (so the properties can fail)."""
    assert naive_es6(1e21) == "1e+21"
    assert naive_es6(1e-7) == "1e-7"
    assert naive_es6(0.000001) == "0.000001"
    assert naive_es6(333333333.3333333) == "333333333.3333333"
    assert naive_es6(5e-324) == "5e-324"
    assert naive_es6(5.960464477539063e-08) == "5.960464477539063e-8"  # not ...0625e-8
    assert utf16_units("\U0001f600") == [0xD83D, 0xDE00]
    assert re.fullmatch(r"-?\d+(\.\d+)?(e[+-]\d+)?", naive_es6(-1.7976931348623157e308))
    assert math.isfinite(float(naive_es6(1.7976931348623157e308)))
