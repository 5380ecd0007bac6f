"""Strategies for canonical JSON values (public through :mod:`merkle_memory.strategies`)."""

from __future__ import annotations

import enum
from typing import Any, Final, Literal, overload

from hypothesis import strategies as st

from ..canonical import MAX_SAFE_INTEGER, JSONInput, JSONScalar, JSONValue
from ..errors import CanonicalizationError

SearchStrategy = st.SearchStrategy

# --- canonical JSON (DESIGN section 2, RFC 8785 section 3) --------------------------------

_TEXT_CHARS: SearchStrategy[str] = st.characters(exclude_categories=["Cs"])
"""Any Unicode scalar value: every code point except the surrogates RFC 8785 forbids."""

_TRICKY_KEYS: Final = (
    "",
    "a",
    "A",
    "\u20ac",
    "\U0001f600",  # above U+FFFF: sorts by its UTF-16 surrogates (RFC 8785 section 3.2.3)
    "\ufb33",  # above the surrogates in code points, below U+1F600 by code point only
    "\r",
    "\x00",
    "1",
    "\u00e9",
    "e\u0301",  # no Unicode normalization: a different key from the one above
)


def json_texts(*, max_size: int = 20) -> SearchStrategy[str]:
    """Strings RFC 8785 accepts: any Unicode scalar values, no lone surrogates.

    Args:
        max_size: most code points in one string.

    Returns:
        A strategy of ``str``.

    Example:
        >>> from hypothesis import given
        >>> @given(json_texts())
        ... def test_text(s):
        ...     assert canonical.loads(canonical.dumps(s)) == s
    """
    return st.text(_TEXT_CHARS, max_size=max_size)


def json_scalars(*, floats: bool = True) -> SearchStrategy[JSONScalar]:
    """JSON scalars in the canonical domain: null, booleans, safe integers, finite doubles, text.

    Args:
        floats: include ``float`` values (every finite double, ``-0.0`` and subnormals
            included). ``False`` keeps values that round-trip through ``loads`` unchanged.

    Returns:
        A strategy of :data:`~merkle_memory.canonical.JSONScalar` (``None | bool | int |
        float | str``); integers lie within +-(2**53 - 1) (DESIGN section 2).

    Example:
        >>> json_scalars(floats=False).example() in (None, True, False) or True
        True
    """
    options: list[SearchStrategy[JSONScalar]] = [
        st.none(),
        st.booleans(),
        st.integers(-MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
        st.sampled_from([0, 1, -1, MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER]),
        json_texts(),
    ]
    if floats:
        options.append(st.floats(allow_nan=False, allow_infinity=False))
        options.append(st.sampled_from([0.0, -0.0, 1e21, 1e-7, 5e-324, 1.7976931348623157e308]))
    return st.one_of(options)


@overload
def json_values(
    *,
    max_depth: int = ...,
    max_size: int = ...,
    floats: bool = ...,
    tuples: Literal[False] = ...,
) -> SearchStrategy[JSONValue]: ...


@overload
def json_values(
    *,
    max_depth: int = ...,
    max_size: int = ...,
    floats: bool = ...,
    tuples: bool,
) -> SearchStrategy[JSONInput]: ...


def json_values(
    *,
    max_depth: int = 4,
    max_size: int = 5,
    floats: bool = True,
    tuples: bool = False,
) -> SearchStrategy[JSONValue] | SearchStrategy[JSONInput]:
    """JSON values inside the RFC 8785 domain, nested at most ``max_depth`` containers deep.

    ``canonical.dumps`` accepts every value drawn, and ``dumps(loads(dumps(v))) == dumps(v)``.
    Object keys mix arbitrary text with keys that test UTF-16 ordering (characters above
    U+FFFF, U+FB33) and non-normalized forms.

    Args:
        max_depth: most nested arrays/objects (0 gives scalars only; the top-level container
            counts as depth 1, as for ``canonical.MAX_DEPTH``).
        max_size: most items in one array or object.
        floats: include ``float`` values (see :func:`json_scalars`).
        tuples: also draw ``tuple`` arrays (``dumps`` accepts them; ``loads`` gives lists).

    Returns:
        A strategy of :data:`~merkle_memory.canonical.JSONValue` (``dict`` with ``str`` keys,
        ``list``, scalars), or with ``tuples`` of :data:`~merkle_memory.canonical.JSONInput`.

    Raises:
        ValueError: ``max_depth`` or ``max_size`` is negative.

    Example:
        >>> from hypothesis import given
        >>> from merkle_memory import canonical
        >>> @given(json_values(max_depth=3))
        ... def test_round_trip(v):
        ...     b = canonical.dumps(v)
        ...     assert canonical.dumps(canonical.loads(b)) == b
    """
    if max_depth < 0 or max_size < 0:
        raise ValueError("max_depth and max_size must be >= 0")
    scalars = json_scalars(floats=floats)
    keys = st.one_of(st.sampled_from(_TRICKY_KEYS), json_texts(max_size=8))
    level: SearchStrategy[Any] = scalars  # JSONInput; JSONValue without tuples
    for _ in range(max_depth):
        inner = level
        containers: list[SearchStrategy[Any]] = [
            st.lists(inner, max_size=max_size),
            st.dictionaries(keys, inner, max_size=max_size),
        ]
        if tuples:
            containers.append(st.lists(inner, max_size=max_size).map(tuple))
        level = st.one_of(scalars, *containers)
    return level


class _IntSub(int):
    pass


class _StrSub(str):
    __slots__ = ()


class _DictSub(dict[str, Any]):
    pass


class _Bare(enum.Enum):
    MEMBER = 1


def _out_of_domain_leaves() -> SearchStrategy[tuple[object, type[CanonicalizationError]]]:
    from ..errors import FloatDomainError, IntegerDomainError, SurrogateError, UnsupportedTypeError

    big = st.one_of(
        st.integers(min_value=MAX_SAFE_INTEGER + 1),
        st.integers(max_value=-MAX_SAFE_INTEGER - 1),
    )
    surrogate = st.builds(
        lambda a, s, b: a + s + b,
        json_texts(max_size=3),
        st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
        json_texts(max_size=3),
    )
    return st.one_of(
        big.map(lambda v: (v, IntegerDomainError)),
        big.map(lambda v: (_IntSub(v), IntegerDomainError)),
        st.sampled_from([float("nan"), float("inf"), float("-inf")]).map(
            lambda v: (v, FloatDomainError)
        ),
        surrogate.map(lambda v: (v, SurrogateError)),
        surrogate.map(lambda v: ({v: 1}, SurrogateError)),
        surrogate.map(lambda v: (_StrSub(v), SurrogateError)),
        st.sampled_from(
            [
                b"bytes",
                bytearray(b"x"),
                {1, 2},
                frozenset(),
                1j,
                object(),
                _Bare.MEMBER,
                _DictSub(a=1),
                {1: "int key"},
                {_IntSub(1): "int subclass key"},
                {True: "bool key"},
                {None: "null key"},
                {1.5: "float key"},
                {("t",): "tuple key"},
            ]
        ).map(lambda v: (v, UnsupportedTypeError)),
    )


def out_of_domain_values(
    *, max_depth: int = 3
) -> SearchStrategy[tuple[object, type[CanonicalizationError]]]:
    """Values ``canonical.dumps`` must reject, each with the error class it must raise.

    One offending leaf (an integer beyond 2**53 - 1, also as an ``int`` subclass; NaN or an
    infinity; a lone surrogate in a string, a ``str`` subclass or a key; a non-``str`` key; a
    bare ``Enum`` member; a ``dict`` subclass; a non-JSON type) is buried
    at a random place inside an otherwise valid value, so a fast path that only checks the
    top level, or that lets the C encoder stringify keys, fails.

    Args:
        max_depth: most containers wrapped around the offender.

    Returns:
        A strategy of ``(value, error_class)`` pairs, where ``error_class`` is a subclass of
        :class:`~merkle_memory.errors.CanonicalizationError`.

    Example:
        >>> from hypothesis import given
        >>> import pytest
        >>> @given(out_of_domain_values())
        ... def test_rejected(pair):
        ...     value, error = pair
        ...     with pytest.raises(error):
        ...         canonical.dumps(value)
    """

    @st.composite
    def wrapped(draw: st.DrawFn) -> tuple[object, type[CanonicalizationError]]:
        value, error = draw(_out_of_domain_leaves())
        for _ in range(draw(st.integers(0, max_depth))):
            siblings = draw(st.lists(json_values(max_depth=1, max_size=2), max_size=2))
            if draw(st.booleans()):
                at = draw(st.integers(0, len(siblings)))
                value = [*siblings[:at], value, *siblings[at:]]
            else:
                key = draw(json_texts(max_size=4))
                obj: dict[str, object] = {f"k{i}": s for i, s in enumerate(siblings)}
                obj[key] = value
                value = obj
        return value, error

    return wrapped()
