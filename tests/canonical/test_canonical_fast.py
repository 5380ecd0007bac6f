"""The fast path of canonical.dumps gives exactly the plain path's bytes, or its exact error."""

from __future__ import annotations

import collections
import decimal
import enum
import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from merkle_memory import canonical
from merkle_memory.canonical._fast import _float_run, encode_fast

MAX = canonical.MAX_SAFE_INTEGER


class Level(enum.IntEnum):
    LOW = 1


class Tag(str, enum.Enum):  # noqa: UP042 - the pre-3.11 spelling, on purpose
    A = "a"


class Sub(str):
    pass


class SubF(float):
    def __repr__(self) -> str:
        return "EVIL"


class SubI(int):
    def __repr__(self) -> str:
        return "EVIL"


class Bare(enum.Enum):
    X = 1


# Floats whose Python repr differs from ES6, and the boundaries of the repr-safe range.
TRICKY_FLOATS = [1e21, 1e-7, 5e-324, 1e16, 1e-4, 9.999999999999999e-5, 1e20, 1e15, -0.0, 0.0]
TRICKY_FLOATS += [1.0, -1.0, 2.0**53, 2.0**53 + 2, 1.7976931348623157e308, 1e-6, 123456789.0]
TRICKY_FLOATS += [9999999999999998.0, 0.1, -1e-300, 4.35, 1789851202.0, 1e300, 2.0**-1074]
HOSTILE = [
    2**53,
    -(2**53),
    10**30,
    math.nan,
    math.inf,
    -math.inf,
    decimal.Decimal("1"),
    b"x",
    {1},
    collections.OrderedDict(),
    "\ud800",
    "\ud8000\udfff",  # imitates a fast-path placeholder
]
# Subclasses of str, int and float with the JSON text of each, valid ones encoded as their base
# value (issue 16 item 13); None: an error (a lone surrogate, a too-large int, a bare Enum).
SUBCLASSED: list[tuple[Any, bytes | None]] = [
    (Level.LOW, b"1"),
    (Tag.A, b'"a"'),
    (Sub("x"), b'"x"'),
    (SubF(1.5), b"1.5"),
    (SubF(1e21), b"1e+21"),
    (SubF(-0.0), b"0"),
    (SubF(1e-7), b"1e-7"),
    (SubF(2.0), b"2"),
    (SubI(-7), b"-7"),
    (Sub("\ud800"), None),
    (SubI(2**53), None),
    (Bare.X, None),
]
KEYS = st.text(max_size=4) | st.sampled_from(["\uffff", "\U0001f600", "\ufb33", "a", "", "\ue000"])
HOSTILE_KEYS = st.sampled_from(
    [1, 2.5, True, False, None, ("t",), Sub("a"), Tag.A, "\udc00", Level.LOW, Sub("\ud800")]
)


def outcome(function: Any, value: Any) -> tuple[str, Any]:
    try:
        return "ok", function(value)
    except Exception as exc:  # the class is what is compared
        return "error", type(exc)


def friendly(floats: st.SearchStrategy[float]) -> st.SearchStrategy[Any]:
    scalars = st.none() | st.booleans() | st.integers(-MAX, MAX) | st.text(max_size=8) | floats
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(KEYS, inner, max_size=4)
        ),
        max_leaves=20,
    )


def adversarial() -> st.SearchStrategy[Any]:
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(2**60), 2**60)
        | st.text(max_size=6)
        | st.floats()
        | st.sampled_from(TRICKY_FLOATS)
        | st.sampled_from(HOSTILE)
        | st.sampled_from([leaf for leaf, _ in SUBCLASSED])
    )
    return st.recursive(
        scalars,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(KEYS | HOSTILE_KEYS, inner, max_size=4)
        ),
        max_leaves=20,
    )


@settings(max_examples=200, deadline=None)
@given(friendly(st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(TRICKY_FLOATS)))
def test_fast_equals_plain_on_friendly_values(value: Any) -> None:
    """On valid values, dumps (fast path) gives exactly the plain path's bytes."""
    assert canonical.dumps(value) == canonical._dumps_reference(value)


@settings(max_examples=250, deadline=None)
@given(adversarial())
def test_fast_equals_plain_on_adversarial_values(value: Any) -> None:
    """On hostile values, dumps gives the same bytes or raises the same error class."""
    assert outcome(canonical.dumps, value) == outcome(canonical._dumps_reference, value)
    fast = encode_fast(value)
    if fast is not None:
        assert outcome(canonical._dumps_reference, value) == ("ok", fast)


@settings(max_examples=120, deadline=None)
@given(
    st.recursive(
        st.none()
        | st.booleans()
        | st.integers(-MAX, MAX)
        | st.text(max_size=8)
        | st.floats(0.5, 9e15),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.text(st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",))),
                inner,
                max_size=4,
            )
        ),
        max_leaves=20,
    ).map(lambda v: [v])
)
def test_fast_path_is_taken_for_plain_json(value: Any) -> None:
    """Containers with BMP keys, safe ints and ordinary floats never need the plain path."""
    out = encode_fast(value)
    assert out is not None
    assert out == canonical._dumps_reference(value)


def test_each_tricky_float_in_every_position() -> None:
    """Each tricky float alone, in a list, as a dict value and nested gives the plain bytes."""
    for number in TRICKY_FLOATS:
        for value in ([number], {"k": number}, [{"a": [number, number]}, (number,)]):
            fast = encode_fast(value)
            assert fast is not None
            assert fast == canonical._dumps_reference(value)


def test_each_hostile_leaf_falls_back_to_the_same_error() -> None:
    """Each hostile leaf and key: no fast bytes, and the same error class as the plain path."""
    for leaf in HOSTILE:
        for value in ([leaf], {"k": leaf}, [1.5e-7, {"a": (leaf,)}]):
            assert encode_fast(value) is None
            assert outcome(canonical.dumps, value)[0] == "error"
            assert outcome(canonical.dumps, value) == outcome(canonical._dumps_reference, value)
    for key in (1, True, None, Sub("a"), "\udc00"):
        assert encode_fast({key: 1}) is None
        assert outcome(canonical.dumps, {key: 1}) == outcome(canonical._dumps_reference, {key: 1})


def test_each_subclassed_leaf_gives_the_plain_bytes_or_error() -> None:
    """Each subclass of str, int or float (and a bare Enum) in every position: dumps and the
    plain path agree (bytes or error class); a valid one takes the fast path and is written
    as its base value, never through its own __repr__ (which returns "EVIL")."""
    for leaf, text in SUBCLASSED:
        for value in ([leaf], {"k": leaf}, [1.5e-7, {"a": (leaf,)}]):
            plain = outcome(canonical._dumps_reference, value)
            assert outcome(canonical.dumps, value) == plain
            assert (plain[0] == "ok") == (text is not None)
            if text is not None:
                assert encode_fast(value) == plain[1]
        if text is not None:
            assert canonical.dumps([leaf]) == b"[" + text + b"]"
            assert canonical.dumps({"k": leaf}) == b'{"k":' + text + b"}"
            assert canonical.dumps(leaf) == text
    for key in (Sub("a"), Tag.A):
        assert encode_fast({key: 1}) is None  # a key not exactly str: the plain path
        assert canonical.dumps({key: 1, "b": Level.LOW}) == b'{"a":1,"b":1}'


def test_astral_keys_use_the_plain_path() -> None:
    """A key beyond U+FFFF (code-point order != UTF-16 order) is left to the plain path."""
    value = {"\uffff": 1, "\U0001f600": 2}
    assert encode_fast(value) is None
    assert canonical.dumps(value) == '{"\U0001f600":2,"\uffff":1}'.encode()
    assert encode_fast({"\uffff": "\U0001f600 in a value is fine"}) is not None


def test_scalars_use_the_plain_path() -> None:
    """Top-level scalars other than an exact ``str`` are left to the plain path."""
    for value in (1, 1.5, None, True, _Text("x")):
        assert encode_fast(value) is None
    assert encode_fast("x") == b'"x"'


class _Text(str):
    """A ``str`` subclass: refused by canonical JSON."""


_STRING_CHARS = st.characters(blacklist_categories=()) | st.sampled_from(
    ["\ud800", "\udfff", "\n", '"', "\\", "\x1f", "\x7f", "\u2028", "\u00e9", "\U0001f600"]
)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=_STRING_CHARS, max_size=40))
def test_fast_string_equals_plain(value: str) -> None:
    """A top-level string: the plain path's bytes, or ``None`` exactly where the plain path
    raises (a lone surrogate), so ``dumps`` still raises its ``SurrogateError``."""
    fast = encode_fast(value)
    plain = outcome(canonical._dumps_reference, value)
    if fast is None:
        assert plain[0] == "error"
    else:
        assert plain == ("ok", fast)
    assert outcome(canonical.dumps, value) == plain


# Runs of floats (an embedding vector): written by the C encoder without a walk, only the
# tokens with an exponent rewritten (module docstring, point 3).
RUN_FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(TRICKY_FLOATS)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(RUN_FLOATS, min_size=0, max_size=40),
    st.sampled_from([list, tuple]),
    st.booleans(),
)
def test_float_runs_equal_plain(items: list[float], kind: Any, nested: bool) -> None:
    """A list or tuple of floats of any length, alone or in a dict beside other values, gives
    exactly the plain path's bytes (integral floats, -0.0, exponents of both signs, subnormals,
    the 1e-4 and 1e16 boundaries)."""
    run = kind(items)
    value: Any = {"embedding": run, "id": "m1", "n": 3} if nested else run
    fast = encode_fast(value)
    assert fast is not None
    assert fast == canonical._dumps_reference(value)


def test_float_run_writes_exponent_tokens_in_es6_form() -> None:
    """The run's text is exact where repr and ES6 differ (|x| < 1e-4: repr has an exponent,
    ES6 only below 1e-6) in the first, a middle and the last position; anything integral,
    every float from 2**52 up included, is left to the walk."""
    base = [0.5] * 16
    for tricky, text in [
        (1e-5, "0.00001"),
        (-2.5e-7, "-2.5e-7"),
        (-9.999999999999999e-5, "-0.00009999999999999999"),
        (1e-7, "1e-7"),
        (5e-324, "5e-324"),
    ]:
        for at in (0, 7, 15):
            items = base.copy()
            items[at] = tricky
            expected = "[" + ",".join(text if i == at else "0.5" for i in range(16)) + "]"
            assert _float_run(items) == expected
            assert canonical.dumps(items) == expected.encode()
    assert _float_run([0.25] * 16) == "[" + ",".join(["0.25"] * 16) + "]"
    assert _float_run([0.5] * 15 + [2.0]) is None  # integral: the walk writes "2"
    assert _float_run([0.5] * 15 + [-0.0]) is None
    for big in (1e16, 1.5e300, 2.0**52 + 0.5 * 2):
        assert _float_run([0.5] * 15 + [big]) is None
    assert canonical.dumps([0.5] * 15 + [2.0, -0.0]) == b"[" + b"0.5," * 15 + b"2,0]"


def test_float_run_refuses_what_is_not_a_float() -> None:
    """Any item that is not a float (an int, a bool, None, a string, a container) or that is
    NaN or Infinity: no run text, and dumps gives the plain bytes or its exact error."""
    for odd in (1, True, None, "x", [0.5], {"a": 0.5}, Level.LOW, math.nan, math.inf, -math.inf):
        items = [0.5] * 20
        items[10] = odd
        assert _float_run(items) is None
        assert outcome(canonical.dumps, items) == outcome(canonical._dumps_reference, items)
    assert outcome(canonical.dumps, [0.5] * 20 + [math.nan])[0] == "error"


def test_float_run_reads_subclasses_as_their_base_value() -> None:
    """A float subclass in a run is written as its base value, never through its __repr__."""
    items: list[float] = [0.5] * 16 + [SubF(1.5), SubF(1e-7), SubF(-3e-5)]
    assert _float_run(items) == "[" + "0.5," * 16 + "1.5,1e-7,-0.00003]"
    assert canonical.dumps(items) == canonical._dumps_reference(items)
    assert _float_run([SubF(2.0)] * 16) is None  # integral, by its base value


class _Spoof:
    """An object whose ``__class__`` claims ``str`` (as ``Mock(spec=str)`` does) but that holds
    no built-in data."""

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return str

    def __hash__(self) -> int:
        return 1


def test_an_object_claiming_a_json_type_is_unsupported_on_both_paths() -> None:
    """isinstance() is fooled by a spoofed ``__class__``; the encoder reads the real type, so
    such a value or key raises UnsupportedTypeError on both paths (found by a review: the fast
    path leaked a bare TypeError from ``str.__str__``, and the error differed from the plain
    path's when another member was invalid too)."""
    from unittest import mock

    from merkle_memory.errors import FloatDomainError, UnsupportedTypeError

    for fake in (_Spoof(), mock.Mock(spec=str), mock.Mock(spec=int), mock.Mock(spec=float)):
        for value in ([fake], {"k": fake}, [0.5] * 16 + [fake], (fake,)):
            assert encode_fast(value) is None
            assert outcome(canonical.dumps, value) == ("error", UnsupportedTypeError)
            assert outcome(canonical._dumps_reference, value) == ("error", UnsupportedTypeError)
        both = {"b": fake, "a": math.inf}  # "a" sorts first: its error is the one raised
        assert outcome(canonical.dumps, both) == ("error", FloatDomainError)
        assert outcome(canonical._dumps_reference, both) == ("error", FloatDomainError)
    assert outcome(canonical.dumps, {_Spoof(): 1}) == ("error", UnsupportedTypeError)
    assert outcome(canonical._dumps_reference, {_Spoof(): 1}) == ("error", UnsupportedTypeError)
