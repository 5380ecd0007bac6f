"""canonical: RFC 8785 dumps, strict loads, digest — behaviour at the edges of the domain."""

from __future__ import annotations

import collections
import decimal
import enum
import fractions
import hashlib
import json
import math
import re
from typing import Any, NamedTuple

import pytest

import merkle_memory
from merkle_memory import canonical
from merkle_memory.canonical._decode import nesting_depth
from merkle_memory.errors import (
    CanonicalizationError,
    DuplicateKeyError,
    EncodingError,
    FloatDomainError,
    IntegerDomainError,
    JSONSyntaxError,
    NestingDepthError,
    SurrogateError,
    UnsupportedTypeError,
)


class Color(enum.IntEnum):
    RED = 1


class MyInt(int):
    pass


class MyDict(dict[str, Any]):
    pass


class MyList(list[Any]):
    pass


class Point(NamedTuple):
    x: int
    y: int


def nested_lists(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def nested_dicts(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"k": value}
    return value


def both_paths(value: Any) -> bytes:
    """dumps through the public (fast) path, checked against the plain path."""
    out = canonical.dumps(value)
    assert canonical._dumps_reference(value) == out
    return out


def test_design_quick_start_example() -> None:
    """The README/DESIGN example: keys sorted, 1.0 -> 1, 2e-7 stays in exponent form."""
    assert both_paths({"b": 1, "a": [1.0, 2e-7]}) == b'{"a":[1,2e-7],"b":1}'


def test_literals_and_scalars() -> None:
    """true/false/null, bool is not an int, strings quoted, top-level scalars allowed."""
    assert both_paths([True, False, None, 0, 1, -1]) == b"[true,false,null,0,1,-1]"
    assert both_paths(True) == b"true"
    assert both_paths(None) == b"null"
    assert both_paths("x") == b'"x"'
    assert both_paths({"a": True}) == b'{"a":true}'
    assert both_paths(()) == b"[]"
    assert both_paths((1, "a")) == b'[1,"a"]'


def test_minimal_string_escaping() -> None:
    """Only quote, backslash and U+0000..U+001F are escaped; short forms and lowercase hex."""
    value = '"\\/\x00\x08\t\n\x0b\x0c\r\x1f\x7f\u2028\u00e9\U0001f600'
    expected = '"\\"\\\\/\\u0000\\b\\t\\n\\u000b\\f\\r\\u001f\x7f\u2028\u00e9\U0001f600"'
    assert both_paths(value) == expected.encode("utf-8")
    assert both_paths([value]) == ("[" + expected + "]").encode("utf-8")


def test_keys_sorted_by_utf16_code_units() -> None:
    """An astral key (D83D DE00) sorts before U+FB33 and U+FFFF, unlike code-point order."""
    value = {"\uffff": 1, "\U0001f600": 2, "\ufb33": 3, "a": 4, "": 5}
    assert both_paths(value) == '{"":5,"a":4,"\U0001f600":2,"\ufb33":3,"\uffff":1}'.encode()


def test_negative_zero_and_integral_floats() -> None:
    """-0.0 is written 0; integral floats have no fraction; float and int give equal bytes."""
    assert both_paths([-0.0, 0.0, 1.0, -5.0, 1e15, 1789851202.0]) == (
        b"[0,0,1,-5,1000000000000000,1789851202]"
    )
    assert canonical.digest(1.0) == canonical.digest(1)


def test_exponent_thresholds() -> None:
    """ES6 switches to exponent form below 1e-6 and from 1e21, with a signed exponent."""
    values = [1e-7, 1e-6, 1.5e-5, 1e-4, 1e16, 1e20, 1e21, 1.5e300, 5e-324, -1e-7]
    expected = b"[1e-7,0.000001,0.000015,0.0001,10000000000000000,100000000000000000000,"
    expected += b"1e+21,1.5e+300,5e-324,-1e-7]"
    assert both_paths(values) == expected


def test_integer_domain_boundaries() -> None:
    """+-(2**53 - 1) are accepted; one beyond raises IntegerDomainError carrying the value."""
    assert both_paths([2**53 - 1, -(2**53 - 1)]) == b"[9007199254740991,-9007199254740991]"
    for bad in (2**53, -(2**53), 2**64, -(10**400)):
        for wrap in (lambda v: v, lambda v: [v], lambda v: {"a": v}):
            with pytest.raises(IntegerDomainError) as info:
                canonical.dumps(wrap(bad))
            assert info.value.value == bad


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_nan_and_infinity_raise(bad: float) -> None:
    """NaN and +-Infinity raise FloatDomainError anywhere in the value."""
    for value in (bad, [bad], {"a": [1, bad]}):
        with pytest.raises(FloatDomainError):
            canonical.dumps(value)


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        frozenset(),
        b"bytes",
        bytearray(b"x"),
        decimal.Decimal("1.5"),
        fractions.Fraction(1, 3),
        1j,
        object(),
        MyDict(a=1),
        MyList([1]),
        Point(1, 2),
        collections.OrderedDict(a=1),
        collections.defaultdict(int),
        range(3),
        iter([1]),
    ],
    ids=lambda value: re.sub(r" at 0x[0-9a-f]+", "", repr(value)),  # stable across processes
)
def test_unsupported_types_raise(value: Any) -> None:
    """Non-JSON types and subclasses of dict, list and tuple raise UnsupportedTypeError
    (subclasses of str, int and float: tests/canonical/test_canonical_subclasses.py)."""
    for wrapped in (value, [value], {"a": value}, ({"b": [value]},)):
        with pytest.raises(UnsupportedTypeError) as info:
            canonical.dumps(wrapped)
        assert info.value.value is value
    assert isinstance(info.value, TypeError)


@pytest.mark.parametrize("key", [1, 1.5, None, True, False, ("a",), Color.RED, MyInt(1)])
def test_non_str_keys_raise(key: Any) -> None:
    """A key that is not a str (bool, IntEnum and int subclasses too) raises; nothing is
    coerced (a str subclass key is its base value: test_canonical_subclasses.py)."""
    with pytest.raises(UnsupportedTypeError):
        canonical.dumps({key: 1})
    with pytest.raises(UnsupportedTypeError):
        canonical.dumps([{"other": 1, key: 2}])


@pytest.mark.parametrize(
    "value",
    ["\ud800", "a\udfffb", ["\udc00"], {"\ud83d": 1}, {"a": {"b\ud800": 1}}, {"k": "\ud800\ud800"}],
)
def test_lone_surrogates_raise(value: Any) -> None:
    """A lone surrogate in a string or key raises SurrogateError (never a UnicodeError)."""
    with pytest.raises(SurrogateError):
        canonical.dumps(value)
    with pytest.raises(SurrogateError):
        canonical._dumps_reference(value)


def test_surrogate_placeholder_imitation_is_caught() -> None:
    """A string shaped like the fast path's float placeholder still raises SurrogateError."""
    for fake in ("\ud8000\udfff", "\ud80099\udfff", "\ud800" + "9" * 5000 + "\udfff"):
        with pytest.raises(SurrogateError):
            canonical.dumps([1e-7, fake])
        with pytest.raises(SurrogateError):
            canonical.dumps({fake: 1e300})


def test_depth_limit_is_max_depth_in_dumps() -> None:
    """MAX_DEPTH (512) nested containers are accepted; one more raises NestingDepthError."""
    assert canonical.MAX_DEPTH == 512
    assert both_paths(nested_lists(512)) == b"[" * 512 + b"]" * 512
    assert canonical.dumps(nested_dicts(512)).count(b"{") == 512
    for value in (nested_lists(513), nested_dicts(513), nested_lists(100_000)):
        with pytest.raises(NestingDepthError):
            canonical.dumps(value)


def test_cyclic_value_raises_nesting_error() -> None:
    """A list that contains itself raises NestingDepthError, not RecursionError or ValueError."""
    cycle: list[Any] = [1]
    cycle.append(cycle)
    with pytest.raises(NestingDepthError):
        canonical.dumps(cycle)


def test_depth_limit_in_loads() -> None:
    """loads accepts 512 levels, rejects 513 and 100,000 levels (arrays and objects)."""
    assert canonical.loads("[" * 512 + "]" * 512) == nested_lists(512)
    with pytest.raises(NestingDepthError):
        canonical.loads("[" * 513 + "]" * 513)
    with pytest.raises(NestingDepthError):
        canonical.loads(b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(NestingDepthError):
        canonical.loads('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(NestingDepthError):
        canonical.loads("[" * 100_000)  # unterminated too: depth is checked first


def test_brackets_inside_strings_do_not_count_as_depth() -> None:
    """Many brackets inside strings (escaped quotes too) are not nesting."""
    text = json.dumps(["[[[{{{" * 200, '\\"[[[' * 200, {"a": ["]]]" * 300]}])
    assert canonical.loads(text) == json.loads(text)
    assert nesting_depth(text) == 3
    assert nesting_depth('"unterminated [[[[') == 0
    assert nesting_depth('[["\\\\"],[1]]') == 2


def test_design_big_integer_literals() -> None:
    """DESIGN §2: exact-double literals beyond 2**53 parse as floats; others raise."""
    assert canonical.loads("9007199254740992") == 2.0**53
    assert type(canonical.loads("9007199254740992")) is float
    assert canonical.loads("10000000000000000") == 1e16
    assert canonical.loads("1152921504606847000") == 1152921504606847000.0
    assert canonical.loads("-9007199254740992") == -(2.0**53)
    for text in (
        "9007199254740993",
        "1152921504606846976",
        "-9007199254740993",
        "12345678901234567",
    ):
        with pytest.raises(IntegerDomainError):
            canonical.loads(text)
        with pytest.raises(IntegerDomainError):
            canonical.loads(f'{{"a":[{text}]}}')
    assert canonical.loads("9007199254740991") == 2**53 - 1
    assert type(canonical.loads("9007199254740991")) is int


def test_huge_integer_literals_never_leak_value_error() -> None:
    """Integer literals with thousands of digits (beyond int's str-digits limit) raise ours."""
    for digits in (310, 400, 4300, 4301, 5000, 100_000):
        with pytest.raises(FloatDomainError):
            canonical.loads("1" * digits)
        with pytest.raises(FloatDomainError):
            canonical.loads("[-" + "9" * digits + "]")
    with pytest.raises(IntegerDomainError):
        canonical.loads("1" * 309)  # finite as a double (1.1e308), but not its ES6 form


def test_number_literal_kinds() -> None:
    """A fraction or exponent makes a float; overflow raises; underflow gives 0.0."""
    value = canonical.loads("[1, 1.0, 1e2, 1E+2, -0, -0.0, 4.50, 1e-400]")
    assert value == [1, 1.0, 100.0, 100.0, 0, -0.0, 4.5, 0.0]
    assert [type(v) for v in value] == [int, float, float, float, int, float, float, float]
    for text in ("1E400", "[-1e309]", '{"a":1.5e+999}', "1" + "0" * 400 + ".5"):
        with pytest.raises(FloatDomainError):
            canonical.loads(text)


@pytest.mark.parametrize("text", ["NaN", "[Infinity]", '{"a":-Infinity}'])
def test_nan_infinity_literals_rejected(text: str) -> None:
    """NaN/Infinity literals (which json.loads accepts) raise FloatDomainError."""
    with pytest.raises(FloatDomainError):
        canonical.loads(text)


def test_duplicate_keys_rejected_at_any_depth() -> None:
    """A key named twice raises DuplicateKeyError carrying the key, even when nested."""
    with pytest.raises(DuplicateKeyError) as info:
        canonical.loads('[{"x":{"k":1,"j":2,"k":3}}]')
    assert info.value.value == "k"
    # Escapes are resolved first: "\u0061" and "a" are the same key.
    with pytest.raises(DuplicateKeyError):
        canonical.loads('{"a":1,"\\u0061":2}')


@pytest.mark.parametrize(
    "data",
    ["", " ", "[1,]", "{'a':1}", "[1] x", "[1][2]", "01", "tru", '"\x01"', "[1", '{"a"}', "+1"],
)
def test_syntax_errors(data: str) -> None:
    """Text that is not one JSON document raises JSONSyntaxError with an offset."""
    with pytest.raises(JSONSyntaxError) as info:
        canonical.loads(data)
    assert isinstance(info.value.pos, int)


def test_encoding_errors() -> None:
    """Invalid UTF-8, encoded surrogates and a byte-order mark raise EncodingError."""
    for data in (b'["\xff"]', b'["\xed\xa0\x80"]', b'["\xc3"]', b"\xef\xbb\xbf[1]"):
        with pytest.raises(EncodingError):
            canonical.loads(data)
    with pytest.raises(EncodingError):
        canonical.loads("\ufeff[1]")


def test_surrogate_escapes_rejected_pairs_accepted() -> None:
    """Lone or reversed surrogate escapes raise; a proper pair decodes to one code point."""
    assert canonical.loads('["\\ud83d\\ude00"]') == ["\U0001f600"]
    assert canonical.loads('{"\\uD83D\\uDE00":1}') == {"\U0001f600": 1}
    assert canonical.loads('["\\\\ud800"]') == ["\\ud800"]  # an escaped backslash, not a surrogate
    for text in ('["\\ude00\\ud83d"]', '["\\ud800x"]', '{"a":{"\\udfff":1}}', '"\\uDBFF"'):
        with pytest.raises(SurrogateError):
            canonical.loads(text)
    with pytest.raises(SurrogateError):
        canonical.loads('["\ud800"]')  # a raw lone surrogate in a str argument


def test_loads_input_types() -> None:
    """bytes, bytearray and str are accepted; anything else raises UnsupportedTypeError."""
    assert canonical.loads(b' {"a" : [1, 2]} \n') == {"a": [1, 2]}
    assert canonical.loads(bytearray(b"[true]")) == [True]
    assert canonical.loads("null") is None
    for bad in (1, None, memoryview(b"[]"), ["[]"]):
        with pytest.raises(UnsupportedTypeError):
            canonical.loads(bad)  # type: ignore[arg-type]


def test_digest_is_sha256_of_dumps() -> None:
    """digest is the 64-char lowercase hex SHA-256 of the canonical bytes."""
    value = {"hello": "world", "n": [1, 2.5, None]}
    expected = hashlib.sha256(b'{"hello":"world","n":[1,2.5,null]}').hexdigest()
    assert canonical.digest(value) == expected
    assert merkle_memory.digest(value) == expected
    assert canonical.digest("") == hashlib.sha256(b'""').hexdigest()
    with pytest.raises(IntegerDomainError):
        canonical.digest([2**60])
    with pytest.raises(UnsupportedTypeError):
        canonical.digest({1: 2})


def test_format_number_argument_checks() -> None:
    """format_number takes floats and ints; other types and huge ints raise our errors."""
    assert canonical.format_number(5) == "5"
    assert canonical.format_number(2**60) == "1152921504606847000"
    with pytest.raises(FloatDomainError):
        canonical.format_number(10**400)
    for bad in ("1.5", True, None, decimal.Decimal(1)):
        with pytest.raises(UnsupportedTypeError):
            canonical.format_number(bad)  # type: ignore[arg-type]


def test_every_error_is_a_value_error_and_ours() -> None:
    """All canonicalization errors are CanonicalizationError and ValueError."""
    for bad in ([math.nan], [2**60], {1: 1}, ["\ud800"], nested_lists(600)):
        with pytest.raises(CanonicalizationError) as info:
            canonical.dumps(bad)
        assert isinstance(info.value, ValueError)


def test_input_is_never_mutated() -> None:
    """dumps does not change the value it is given (the fast path copies before rewriting)."""
    value = {"a": [1.0, 1e-7, {"b": 1e300, "c": -0.0}], "d": (2.0,)}
    snapshot = repr(value)
    assert both_paths(value) == b'{"a":[1,1e-7,{"b":1e+300,"c":0}],"d":[2]}'
    assert repr(value) == snapshot
    assert type(value["a"][0]) is float
