"""rfc8785's own test suite, behaviour by behaviour, run against ``canonical`` through a shim.

trailofbits/rfc8785.py (v0.1.4, Apache-2.0) tests its package with ``test/test_impl.py`` and
``test/test_init.py`` over the cyberphone vectors and RFC 8785 Appendix B; both data sets are
in ``tests/assets/jcs`` (byte-identical, see tests/assets/README.md). Each test below states
one of its test functions (same name) in this project's words and runs it on two
implementations: the shim (``rfc8785_shim``: rfc8785's API mapped to ``canonical``) and the
real ``rfc8785`` package (the ``test`` extra installs it), so a test that passed on
``canonical`` alone could not be a mis-statement of upstream's check. Where the two domains
differ by design (a ``dict`` subclass), the difference itself is asserted. The upstream files
themselves run with ``python tests/canonical/rfc8785_shim.py DIR`` (see that module).

Then a Hypothesis property holds ``canonical.dumps`` byte-equal to ``rfc8785.dumps`` on every
value both accept, subclasses of ``str``, ``int`` and ``float`` included.
"""

from __future__ import annotations

import csv
import enum
import gzip
import io
import json
import struct
from itertools import islice
from types import ModuleType
from typing import Any

import pytest
import rfc8785
import rfc8785._impl
import rfc8785_shim
from hypothesis import given, settings
from hypothesis import strategies as st
from support import asset_path

from merkle_memory import canonical
from merkle_memory.errors import UnsupportedTypeError

SHIM, SHIM_IMPL = rfc8785_shim.build()
BOTH = pytest.mark.parametrize(
    ("package", "impl"),
    [(SHIM, SHIM_IMPL), (rfc8785, rfc8785._impl)],
    ids=["canonical", "rfc8785"],
)


def _appendix_b() -> list[tuple[str, bytes | None]]:
    """RFC 8785 Appendix B: (IEEE 754 bits in hex, ES6 text or None for an error)."""
    with asset_path("jcs", "rfc8785", "appendix_b.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    return [
        (r["ieee754_hex"], None if r["expected"] == "ERROR" else r["expected"].encode())
        for r in rows
    ]


def _double(hex_bits: str) -> float:
    value: float = struct.unpack(">d", struct.pack(">Q", int(hex_bits, 16)))[0]
    return value


@BOTH
def test_es6_float_stringification(package: ModuleType, impl: ModuleType) -> None:
    """Each of the 26 Appendix B doubles is written in its ES6 form; NaN and Infinity raise
    FloatDomainError."""
    cases = _appendix_b()
    assert len(cases) == 26
    for hex_bits, expected in cases:
        sink = io.BytesIO()
        if expected is None:
            with pytest.raises(impl.FloatDomainError):
                impl._serialize_float(_double(hex_bits), sink)
        else:
            impl._serialize_float(_double(hex_bits), sink)
            assert sink.getvalue() == expected, hex_bits


@BOTH
def test_es6_float_stringification_full(package: ModuleType, impl: ModuleType) -> None:
    """The first 20,000 lines of cyberphone's ES6 number file (upstream reads the 100M-line
    file when present): each double is written as the line says."""
    path = asset_path("jcs", "cyberphone", "es6testfile_first100k.txt.gz")
    with gzip.open(path, mode="rt") as lines:
        count = 0
        for line in islice(lines, 20_000):
            hex_bits, expected = line.rstrip().split(",", 1)
            sink = io.BytesIO()
            impl._serialize_float(_double(hex_bits), sink)
            assert sink.getvalue().decode() == expected, hex_bits
            count += 1
    assert count == 20_000


@BOTH
def test_integer_domain(package: ModuleType, impl: ModuleType) -> None:
    """+-(2**53 - 1) are written; one beyond either raises IntegerDomainError."""
    assert impl.dumps(impl._INT_MAX) == b"9007199254740991"
    assert impl.dumps(impl._INT_MIN) == b"-9007199254740991"
    for beyond in (impl._INT_MAX + 1, impl._INT_MIN - 1):
        with pytest.raises(impl.IntegerDomainError):
            impl.dumps(beyond)


@BOTH
def test_string_invalid_utf8(package: ModuleType, impl: ModuleType) -> None:
    """The six characters backslash-u-d-e-a-d are a string like any other; a lone surrogate
    code point raises CanonicalizationError."""
    assert impl.dumps("\\udead") == b'"\\\\udead"'
    with pytest.raises(impl.CanonicalizationError):
        impl.dumps("\udead")


@BOTH
def test_dumps_invalid_type(package: ModuleType, impl: ModuleType) -> None:
    """A set has no JSON form: CanonicalizationError."""
    with pytest.raises(impl.CanonicalizationError):
        impl.dumps({1, 2, 3})


@BOTH
def test_dumps_intenum(package: ModuleType, impl: ModuleType) -> None:
    """IntEnum members are their integers."""

    class X(enum.IntEnum):
        A = 1
        B = 2
        C = 9001

    assert impl.dumps([X.A, X.B, X.C]) == b"[1,2,9001]"


@BOTH
def test_dumps_strenum(package: ModuleType, impl: ModuleType) -> None:
    """StrEnum members are their strings."""

    class X(enum.StrEnum):
        A = "foo"
        B = "bar"
        C = "baz"

    assert impl.dumps([X.A, X.B, X.C]) == b'["foo","bar","baz"]'


@BOTH
def test_dumps_enum_multiple_inheritance(package: ModuleType, impl: ModuleType) -> None:
    """(str, Enum) and (int, Enum) members are their values. A (dict, Enum) member is where
    the domains differ: rfc8785 writes the dict, canonical refuses a dict subclass."""

    class X(str, enum.Enum):  # noqa: UP042 - the pre-3.11 spelling, on purpose
        A = "foo"
        B = "bar"

    class Z(int, enum.Enum):
        A = 1
        B = 2

    class Y(dict, enum.Enum):  # type: ignore[type-arg]
        A = {"A": "foo"}  # noqa: RUF012 - an enum value, not a class attribute

    assert impl.dumps([X.A, X.B]) == b'["foo","bar"]'
    assert impl.dumps([Z.A, Z.B]) == b"[1,2]"
    if impl is SHIM_IMPL:
        with pytest.raises(UnsupportedTypeError, match="is a subclass of dict"):
            impl.dumps([Y.A])
    else:
        assert impl.dumps([Y.A]) == b'[{"A":"foo"}]'


@BOTH
def test_dumps_bare_enum_fails(package: ModuleType, impl: ModuleType) -> None:
    """A bare Enum member (values "1", 2, 3.0) is refused: CanonicalizationError, "unsupported
    type"."""

    class X(enum.Enum):
        A = "1"
        B = 2
        C = 3.0

    for member in X:
        with pytest.raises(impl.CanonicalizationError, match="unsupported type"):
            impl.dumps([member])


@BOTH
def test_dumps_nonstring_key(package: ModuleType, impl: ModuleType) -> None:
    """Object keys 1 and None: CanonicalizationError, "object keys must be strings"."""
    with pytest.raises(impl.CanonicalizationError, match="object keys must be strings"):
        impl.dumps({1: 2, None: 3})


@BOTH
def test_version(package: ModuleType, impl: ModuleType) -> None:
    """The package has a string __version__."""
    assert isinstance(package.__version__, str) and package.__version__


@BOTH
@pytest.mark.parametrize("name", ["arrays", "french", "structures", "unicode", "values", "weird"])
def test_roundtrip(package: ModuleType, impl: ModuleType, name: str) -> None:
    """Each cyberphone input canonicalizes to exactly its output file and its hex form, and
    the output parses back to the input's value."""
    data = asset_path("jcs", "cyberphone", "input", f"{name}.json").read_bytes()
    output = asset_path("jcs", "cyberphone", "output", f"{name}.json").read_bytes()
    outhex = bytes.fromhex(asset_path("jcs", "cyberphone", "outhex", f"{name}.txt").read_text())
    value = json.loads(data)
    actual = package.dumps(value)
    assert output == actual == outhex
    assert json.loads(actual) == value


@BOTH
def test_exception_hierarchy(package: ModuleType, impl: ModuleType) -> None:
    """CanonicalizationError is a ValueError; the two domain errors are its subclasses and
    unrelated to each other."""
    assert issubclass(package.CanonicalizationError, ValueError)
    assert issubclass(package.IntegerDomainError, package.CanonicalizationError)
    assert issubclass(package.FloatDomainError, package.CanonicalizationError)
    assert not issubclass(package.IntegerDomainError, package.FloatDomainError)
    assert not issubclass(package.FloatDomainError, package.IntegerDomainError)


@BOTH
def test_dump_writes_the_dumps_bytes_to_a_binary_sink(
    package: ModuleType, impl: ModuleType
) -> None:
    """dump(value, sink) writes exactly dumps(value) (upstream's dump, tested here too)."""
    sink = io.BytesIO()
    package.dump({"b": [1.0, "\u20ac"], "a": None}, sink)
    assert sink.getvalue() == b'{"a":null,"b":[1,"\xe2\x82\xac"]}'


# --- canonical against rfc8785 as a reference implementation ---------------------------------


class Kind(enum.StrEnum):
    USER = "user"
    TOOL = "t\u00f6\U0001f600l"


class Level(enum.IntEnum):
    LOW = -3
    HIGH = 2**53 - 1


class Ratio(float, enum.Enum):
    HALF = 0.5
    TINY = 1e-7


class Label(str):
    __slots__ = ()


class Count(int):
    pass


class Weight(float):
    pass


_SCALARS: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-canonical.MAX_SAFE_INTEGER, canonical.MAX_SAFE_INTEGER),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=8),
    st.sampled_from([*Kind, *Level, *Ratio]),
    st.text(st.characters(exclude_categories=["Cs"]), max_size=4).map(Label),
    st.integers(-(2**40), 2**40).map(Count),
    st.floats(allow_nan=False, allow_infinity=False).map(Weight),
)
_KEYS: st.SearchStrategy[Any] = st.one_of(
    st.text(st.characters(exclude_categories=["Cs"]), max_size=4), st.sampled_from([*Kind])
)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        _SCALARS,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.lists(inner, max_size=3).map(tuple)
            | st.dictionaries(_KEYS, inner, max_size=4)
        ),
        max_leaves=24,
    )
)
def test_canonical_equals_rfc8785_on_the_common_domain(value: Any) -> None:
    """Every value in both domains (safe integers, finite floats, text, containers, and
    StrEnum, IntEnum, (float, Enum) and plain subclasses of str, int and float, as values and
    StrEnum as keys): canonical.dumps gives exactly rfc8785.dumps's bytes."""
    assert canonical.dumps(value) == rfc8785.dumps(value)
