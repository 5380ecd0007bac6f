"""RFC 8785 serialization, plain path: ES6 number formatting and the reference encoder.

This is the obviously-correct encoder that ``canonical.dumps`` falls back to (and that the
fast path in ``_fast`` is property-tested against). It walks the value once in
Python, checking exact types, and builds the output from small string parts; a subclass of
``str``, ``int`` or ``float`` is replaced by its base value first (:func:`json_base`).
"""

from __future__ import annotations

import enum
import itertools
import json
import re
from collections.abc import Callable
from typing import Any, Final

from ..errors import (
    CanonicalizationError,
    DuplicateKeyError,
    FloatDomainError,
    IntegerDomainError,
    NestingDepthError,
    SurrogateError,
    UnsupportedTypeError,
)

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Largest integer magnitude ``dumps`` accepts (RFC 8785 Appendix B note 1)."""

MAX_DEPTH: Final = 512
"""Deepest nesting of arrays and objects accepted by ``dumps`` and ``loads``; the top-level
container is depth 1, so 512 nested arrays are accepted and 513 raise ``NestingDepthError``."""

SURROGATE: Final = re.compile("[\ud800-\udfff]")
"""Any lone UTF-16 surrogate code point in a Python ``str``."""

# The stdlib's C string escaper writes exactly RFC 8785 §3.2.2.2 strings (with
# ensure_ascii=False semantics): only '"', '\\' and U+0000..U+001F are escaped, the short forms
# \b \t \n \f \r are used, and other control characters become lowercase \u00hh.
encode_string: Final[Callable[[str], str]] = json.encoder.encode_basestring


def format_number(value: float) -> str:
    """Format a finite double the ECMAScript way (RFC 8785 §3.2.2.3, ES6 Number::toString).

    Args:
        value: a finite ``float``; an ``int`` is converted to the nearest double first; a
            subclass of either is read as its base value (:func:`json_base`).

    Returns:
        The shortest round-trip decimal form, e.g. ``1e+21``, ``0.000001``, ``1e-7``,
        ``333333333.3333333``; ``-0.0`` gives ``"0"``.

    Raises:
        FloatDomainError: for NaN or +-Infinity, or an ``int`` too large for a double.
        UnsupportedTypeError: for anything that is not an ``int`` or ``float`` (``bool``
            included).
    """
    t = type(value)
    if t is not float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            raise UnsupportedTypeError(f"format_number takes a float, not {t.__name__}", value)
        try:
            value = float(json_base(value))  # never a subclass's own __float__
        except OverflowError as exc:
            raise FloatDomainError("integer too large for a double", value) from exc
    if value - value != 0.0:  # NaN or +-Infinity
        raise FloatDomainError(f"{value!r} is not a finite number (RFC 8785 §3.2.2.3)", value)
    if value == 0.0:
        return "0"  # -0.0 included (RFC 8785 §3.2.2.3)
    # repr gives the shortest round-trip digits (sys.float_repr_style == "short").
    text = float.__repr__(value)
    mantissa, e_mark, exp_text = text.partition("e")
    if not e_mark:
        # repr is fixed-point exactly when 1e-4 <= |value| < 1e16; ES6 is fixed-point there
        # too, with the same digits, but writes integral values without ".0".
        return mantissa[:-2] if mantissa.endswith(".0") else mantissa
    exponent = int(exp_text)
    if exponent > 20 or exponent < -6:
        # Both forms are scientific; ES6 has no leading zeros in the exponent and a sign.
        return f"{mantissa}e{'+' if exponent > 0 else '-'}{abs(exponent)}"
    # 1e-7 <= |value| < 1e-4 or 1e16 <= |value| < 1e21: ES6 writes these in fixed point.
    sign = ""
    if mantissa[0] == "-":
        sign = "-"
        mantissa = mantissa[1:]
    digits = mantissa.replace(".", "")
    # value = 0.digits x 10**n (repr's mantissa has exactly one digit before the point).
    n = exponent + 1
    k = len(digits)
    if n > 0:  # 17 <= n <= 21 and k <= 17 digits: an integer padded with zeros
        return sign + digits + "0" * (n - k)
    return sign + "0." + "0" * (-n) + digits  # -5 <= n <= -4


def json_base(value: Any) -> str | int | float:
    """The JSON value of a subclass of ``str``, ``int`` or ``float`` (an ``IntEnum``, a
    ``StrEnum``, an ``IntFlag``, ``class Kind(str, Enum)``, a plain subclass): its base value.

    The value is read with the base class's own method (``str.__str__``, ``int.__index__``,
    ``float.__float__``), which copies the built-in data into an exact ``str``, ``int`` or
    ``float``; an override of ``__str__``, ``__repr__``, ``__format__``, ``__int__``,
    ``__index__`` or ``__float__`` in the subclass is never called. ``bool`` never comes here
    (it is its own JSON type). Containers' subclasses are refused: they can override
    iteration, so their JSON text would depend on code (docs/DECISIONS.md).

    Args:
        value: a value whose type is not exactly one of the JSON types.

    Returns:
        An exact ``str``, ``int`` or ``float``, equal to ``value``'s built-in data.

    Raises:
        UnsupportedTypeError: anything else; for an ``Enum`` member not derived from ``str``,
            ``int`` or ``float`` the message says to pass its ``.value`` (or derive the enum
            from ``StrEnum`` / ``IntEnum``).
    """
    # The real type, not isinstance: an object whose ``__class__`` claims ``str`` (a mock
    # with ``spec=str``) holds no built-in data and is refused below.
    t = type(value)
    if issubclass(t, str):
        return str.__str__(value)
    if issubclass(t, int):
        return int.__index__(value)
    if issubclass(t, float):
        return float.__float__(value)
    if issubclass(t, dict | list | tuple):
        raise UnsupportedTypeError(
            f"unsupported type: {t.__name__} is a subclass of "
            f"{next(b for b in (dict, list, tuple) if issubclass(t, b)).__name__}; "
            "convert it (dict(x), list(x)) before hashing (RFC 8785 §3.1)",
            value,
        )
    if isinstance(value, enum.Enum):
        raise UnsupportedTypeError(
            f"unsupported type: {t.__name__}.{value.name} is an Enum member with no JSON "
            "form; pass its .value, or derive the enum from StrEnum, IntEnum or float "
            "(RFC 8785 §3.1)",
            value,
        )
    raise UnsupportedTypeError(
        f"unsupported type: {t.__name__} has no canonical JSON form (RFC 8785 §3.1)",
        value,
    )


def _subclass_members(value: dict[Any, Any]) -> list[tuple[str, Any]] | None:
    """Check the keys of an object; ``None`` when every key is an exact ``str`` (sort them
    with :func:`utf16_key`), else the members as ``(key, value)`` sorted by the keys' UTF-16
    code units (RFC 8785 §3.2.3), each ``str`` subclass key replaced by its base value
    (:func:`json_base`).

    Raises:
        UnsupportedTypeError: a key that is not a ``str`` (an ``int``, ``None``, ``bool``...).
        SurrogateError: a lone surrogate in a key.
        DuplicateKeyError: two keys with the same string value (possible only with a ``str``
            subclass key whose ``__eq__`` or ``__hash__`` differs from ``str``'s).
    """
    subclass = False
    for key in value:
        if type(key) is not str:
            if not issubclass(type(key), str):  # the real type (a mock may claim str)
                raise UnsupportedTypeError(
                    f"object keys must be strings, not {type(key).__name__}", key
                )
            subclass = True
            key = str.__str__(key)
        if SURROGATE.search(key) is not None:
            raise SurrogateError("lone surrogate in object key (RFC 8785 §3.2.2.2)", key)
    if not subclass:  # the usual case: exact str keys, unique by construction
        return None
    members = sorted(
        ((str.__str__(key), item) for key, item in value.items()),
        key=lambda member: utf16_key(member[0]),
    )
    for (key, _), (after, _) in itertools.pairwise(members):
        if key == after:
            raise DuplicateKeyError(
                f"two object keys with the same value {key[:60]!r} (a str subclass key; "
                "RFC 8785 §3.1)",
                key,
            )
    return members


def _string(value: str) -> str:
    if SURROGATE.search(value) is not None:
        raise SurrogateError("lone surrogate in string (RFC 8785 §3.2.2.2)", value)
    return encode_string(value)


def utf16_key(key: str) -> bytes:
    """Sort key of an object property name: its UTF-16 code units (RFC 8785 §3.2.3)."""
    return key.encode("utf-16-be")


def _depth_error() -> NestingDepthError:
    return NestingDepthError(f"nesting deeper than {MAX_DEPTH} levels (canonical.MAX_DEPTH)")


def _encode(value: Any, parts: list[str], depth: int) -> None:
    # Exact type checks: subclasses (bool is an int, IntEnum, str subclasses) must not slip in.
    t = type(value)
    if t is str:
        parts.append(_string(value))
    elif value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif t is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            parts.append(int.__repr__(value))
        else:
            raise IntegerDomainError(
                "integer outside +-(2**53 - 1); store big ids as strings "
                "(RFC 8785 Appendix B note 1)",
                value,
            )
    elif t is float:
        parts.append(format_number(value))
    elif t is dict:
        if depth >= MAX_DEPTH:
            raise _depth_error()
        members = _subclass_members(value)
        parts.append("{")
        first = True
        if members is None:  # exact str keys: the plain loop, no (key, item) pairs built
            for key in sorted(value, key=utf16_key):  # RFC 8785 §3.2.3: UTF-16 code units
                if not first:
                    parts.append(",")
                first = False
                parts.append(encode_string(key))
                parts.append(":")
                _encode(value[key], parts, depth + 1)
        else:
            for key, item in members:
                if not first:
                    parts.append(",")
                first = False
                parts.append(encode_string(key))
                parts.append(":")
                _encode(item, parts, depth + 1)
        parts.append("}")
    elif t is list or t is tuple:
        if depth >= MAX_DEPTH:
            raise _depth_error()
        parts.append("[")
        first = True
        for item in value:
            if not first:
                parts.append(",")
            first = False
            _encode(item, parts, depth + 1)
        parts.append("]")
    else:
        base = json_base(value)
        try:
            _encode(base, parts, depth)
        except CanonicalizationError as exc:
            exc.value = value  # the caller's value, not its base copy
            raise


def dumps_reference(value: Any) -> bytes:
    """Plain-path RFC 8785 encoder; same contract as ``canonical.dumps``.

    Raises:
        UnsupportedTypeError, IntegerDomainError, FloatDomainError, SurrogateError,
        NestingDepthError: as documented on ``canonical.dumps``.
    """
    parts: list[str] = []
    try:
        _encode(value, parts, 0)
    except RecursionError as exc:
        raise NestingDepthError("nesting too deep for the interpreter's stack") from exc
    return "".join(parts).encode("utf-8")
