"""canonical.dumps on subclasses of the JSON types (issue 16 item 13).

A subclass of ``str``, ``int`` or ``float`` (``StrEnum``, ``IntEnum``, ``IntFlag``, a mixin
``Enum``, a plain subclass) is written as its base value, read with the base class's own
method, never with the subclass's ``__str__``/``__repr__``/``__int__``/``__index__``/
``__float__``/``__format__``; ``bool`` stays a boolean; a bare ``Enum`` and subclasses of
containers are refused. The fast path and the plain path agree on every case.
"""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from merkle_memory import canonical
from merkle_memory.canonical._encode import json_base
from merkle_memory.errors import (
    CanonicalizationError,
    DuplicateKeyError,
    FloatDomainError,
    IntegerDomainError,
    SurrogateError,
    UnsupportedTypeError,
)


class Role(enum.StrEnum):
    USER = "user"
    ASSISTANT = "assistant"


class Priority(enum.IntEnum):
    LOW = 1
    TOP = 9007199254740991


class Perm(enum.IntFlag):
    READ = 4
    WRITE = 2


class Kind(str, enum.Enum):  # noqa: UP042 - the pre-3.11 spelling, on purpose
    NOTE = "note"


class Scale(float, enum.Enum):
    TENTH = 0.1
    BIG = 1e21


class Colour(enum.Enum):
    RED = 1


class Loud(str):
    """A str subclass whose every text hook lies."""

    def __str__(self) -> str:
        return "LIE"

    def __repr__(self) -> str:
        return "LIE"

    def __format__(self, spec: str) -> str:
        return "LIE"


class Shifty(int):
    """An int subclass whose every number hook lies."""

    def __repr__(self) -> str:
        return "666"

    def __str__(self) -> str:
        return "666"

    def __int__(self) -> int:
        return 666

    def __index__(self) -> int:
        return 666

    def __float__(self) -> float:
        return 666.0


class Drifty(float):
    """A float subclass whose every number hook lies."""

    def __repr__(self) -> str:
        return "6.66"

    def __float__(self) -> float:
        return 6.66


class Twin(str):
    """A str subclass whose instances never equal anything (so a dict can hold two equal
    strings as two keys)."""

    def __eq__(self, other: object) -> bool:
        return False

    def __hash__(self) -> int:
        return id(self)


# (value, its exact JSON text)
CASES: list[tuple[Any, bytes]] = [
    (Role.USER, b'"user"'),
    (Priority.LOW, b"1"),
    (Priority.TOP, b"9007199254740991"),
    (Perm.READ | Perm.WRITE, b"6"),
    (Kind.NOTE, b'"note"'),
    (Scale.TENTH, b"0.1"),
    (Scale.BIG, b"1e+21"),
    (Loud("caf\u00e9\n"), b'"caf\xc3\xa9\\n"'),
    (Shifty(42), b"42"),
    (Shifty(-(2**53) + 1), b"-9007199254740991"),
    (Drifty(2.5), b"2.5"),
    (Drifty(1e-7), b"1e-7"),
    (Drifty(-0.0), b"0"),
    (Drifty(3.0), b"3"),
]


@pytest.mark.parametrize(("value", "text"), CASES, ids=repr)
def test_subclasses_are_their_base_values_everywhere(value: Any, text: bytes) -> None:
    """Alone, in a list, a tuple and an object, through dumps (fast path) and the plain path:
    exactly the text of the base value, whatever the subclass's own methods say."""
    wrapped = [
        (value, text),
        ([value, 1.5e-7], b"[" + text + b",1.5e-7]"),
        ((value,), b"[" + text + b"]"),
        ({"k": value, "a": [value]}, b'{"a":[' + text + b'],"k":' + text + b"}"),
    ]
    for item, expected in wrapped:
        assert canonical.dumps(item) == expected
        assert canonical._dumps_reference(item) == expected
    assert canonical.digest([value]) == canonical.digest(canonical.loads(b"[" + text + b"]"))


def test_json_base_returns_exact_builtins() -> None:
    """json_base gives an exact str, int or float equal to the built-in data."""
    assert [(type(v), v) for v in map(json_base, [Role.USER, Shifty(7), Drifty(0.5)])] == [
        (str, "user"),
        (int, 7),
        (float, 0.5),
    ]
    assert type(json_base(Loud("x"))) is str and json_base(Loud("x")) == "x"


def test_bool_stays_a_boolean() -> None:
    """True and False are JSON booleans, never 1 and 0, next to IntEnum members."""
    assert canonical.dumps([True, False, Priority.LOW]) == b"[true,false,1]"
    assert canonical.dumps({"t": True, "p": Perm.READ}) == b'{"p":4,"t":true}'


def test_an_enum_value_and_its_plain_value_have_one_digest() -> None:
    """A record holding Role.USER and one holding "user" have the same bytes and digest."""
    with_enum = {"role": Role.ASSISTANT, "priority": Priority.LOW, "kind": Kind.NOTE}
    plain = {"role": "assistant", "priority": 1, "kind": "note"}
    assert canonical.dumps(with_enum) == b'{"kind":"note","priority":1,"role":"assistant"}'
    assert canonical.digest(with_enum) == canonical.digest(plain)


def test_str_subclass_keys_are_their_base_values_sorted() -> None:
    """StrEnum and str subclass keys are written as their strings, sorted with the others by
    UTF-16 code units; int-like keys (IntEnum too) are still refused."""
    value = {Role.USER: 1, "b": 2, Loud("\U0001f600"): 3, "\uffff": 4}
    assert canonical.dumps(value) == '{"b":2,"user":1,"\U0001f600":3,"\uffff":4}'.encode()
    assert canonical._dumps_reference(value) == canonical.dumps(value)
    with pytest.raises(UnsupportedTypeError, match="object keys must be strings, not Priority"):
        canonical.dumps({Priority.LOW: 1})


def test_two_keys_with_one_string_value_raise_duplicate_key() -> None:
    """A dict can hold two Twin("a") keys (they never compare equal); written out they would
    be one key twice, so DuplicateKeyError (never two members with one name)."""
    value = {Twin("a"): 1, Twin("a"): 2}
    assert len(value) == 2
    for dumps in (canonical.dumps, canonical._dumps_reference):
        with pytest.raises(DuplicateKeyError) as info:
            dumps({"x": value})
        assert info.value.value == "a"
    assert canonical.dumps({Twin("a"): 1, "b": 2}) == b'{"a":1,"b":2}'


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        (Colour.RED, UnsupportedTypeError, "unsupported type: Colour.RED is an Enum member"),
        (Shifty(2**53), IntegerDomainError, "integer outside"),
        (Drifty(float("nan")), FloatDomainError, "not a finite number"),
        (Loud("a\ud800"), SurrogateError, "lone surrogate"),
    ],
    ids=["bare-enum", "int-range", "nan", "surrogate"],
)
def test_subclass_values_outside_the_domain_raise(
    value: Any, error: type[CanonicalizationError], message: str
) -> None:
    """A bare Enum member is refused (pass .value); a subclass value is checked as its base
    value (range, finiteness, surrogates), and the error carries the value given."""
    for wrapped in (value, [value], {"k": (value,)}):
        for dumps in (canonical.dumps, canonical._dumps_reference):
            with pytest.raises(error, match=message) as info:
                dumps(wrapped)
            assert info.value.value is value


def test_bare_enum_message_says_what_to_do() -> None:
    """The bare-Enum refusal names the member and the way out, and is a CanonicalizationError
    and a TypeError."""
    with pytest.raises(UnsupportedTypeError) as info:
        canonical.dumps({"colour": Colour.RED})
    assert str(info.value) == (
        "unsupported type: Colour.RED is an Enum member with no JSON form; pass its .value, "
        "or derive the enum from StrEnum, IntEnum or float (RFC 8785 §3.1)"
    )
    assert isinstance(info.value, CanonicalizationError) and isinstance(info.value, TypeError)


def test_format_number_reads_subclasses_as_base_values() -> None:
    """format_number of a float or int subclass uses the base value, not __float__."""
    assert canonical.format_number(Drifty(1e21)) == "1e+21"
    assert canonical.format_number(Shifty(3)) == "3"
    with pytest.raises(UnsupportedTypeError):
        canonical.format_number(True)


_SUBCLASSED = st.one_of(
    st.sampled_from([*Role, *Priority, *Kind, *Scale]),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=6).map(Loud),
    st.integers(-(2**53) + 1, 2**53 - 1).map(Shifty),
    st.floats(allow_nan=False, allow_infinity=False).map(Drifty),
)


def _base(value: Any) -> Any:
    """The naive reference: rebuild the value with every subclass leaf made exact by the
    base class's constructor on the enum value or on the built-in data."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Loud):
        return "".join(value[i] for i in range(len(value)))
    if isinstance(value, Shifty):
        return int(value + 0)
    if isinstance(value, Drifty):
        return value + 0.0
    if isinstance(value, list | tuple):
        return [_base(v) for v in value]
    if isinstance(value, dict):
        return {k: _base(v) for k, v in value.items()}
    return value


@settings(max_examples=200, deadline=None)
@given(
    st.recursive(
        _SUBCLASSED | st.integers(-100, 100) | st.text(max_size=3) | st.booleans(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner),
        max_leaves=16,
    )
)
def test_subclassed_values_encode_as_their_rebuilt_base(value: Any) -> None:
    """Any value with subclass leaves gives the bytes of the same value rebuilt with exact
    types (a naive reference), on both paths."""
    expected = canonical._dumps_reference(_base(value))
    assert canonical.dumps(value) == expected
    assert canonical._dumps_reference(value) == expected
