"""Canonical JSON (RFC 8785, JCS) bytes, a strict parser, and SHA-256 digests.

``dumps(value)`` gives the exact RFC 8785 bytes of a JSON value; ``digest(value)`` their
SHA-256 as 64-char lowercase hex, the id format used everywhere in merkle_memory; ``loads``
parses JSON text strictly, so that ``dumps(loads(dumps(x))) == dumps(x)`` for every accepted
``x``.

Domain (RFC 8785 §3.1, I-JSON): ``dict`` with ``str`` keys, ``list``, ``tuple``, ``str``,
``int`` within +-(2**53 - 1), finite ``float``, ``bool`` and ``None``. Anything else raises a
:class:`~merkle_memory.errors.CanonicalizationError` subclass.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any, Final

from .errors import (
    DuplicateKeyError,
    EncodingError,
    FloatDomainError,
    IntegerDomainError,
    JSONSyntaxError,
    NestingDepthError,
    SurrogateError,
    UnsupportedTypeError,
)

__all__ = ["MAX_DEPTH", "MAX_SAFE_INTEGER", "digest", "dumps", "format_number", "loads"]

MAX_SAFE_INTEGER: Final = 2**53 - 1
"""Largest integer magnitude ``dumps`` accepts (RFC 8785 Appendix B note 1)."""

MAX_DEPTH: Final = 512
"""Deepest nesting of arrays and objects accepted by ``dumps`` and ``loads`` (the top-level
container is depth 1). Deeper values raise ``NestingDepthError``."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
_encode_string: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]


def format_number(value: float) -> str:
    """Format a finite double the ECMAScript way (RFC 8785 §3.2.2.3, ES6 Number::toString).

    Args:
        value: a finite ``float`` (an ``int`` is converted first).

    Returns:
        The shortest round-trip decimal form, e.g. ``1e+21``, ``0.000001``, ``1e-7``; ``-0.0``
        gives ``"0"``.

    Raises:
        FloatDomainError: for NaN or +-Infinity.
    """
    value = float(value)
    if not math.isfinite(value):
        raise FloatDomainError(f"{value!r} is not a finite number (RFC 8785 §3.2.2.3)", value)
    if value == 0.0:
        return "0"
    text = float.__repr__(value)
    sign = ""
    if text[0] == "-":
        sign = "-"
        text = text[1:]
    mantissa, _, exp_text = text.partition("e")
    exponent = int(exp_text) if exp_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    if frac_part == "0":
        frac_part = ""
    digits = int_part + frac_part
    # value = 0.digits x 10**n with the leading digit non-zero (ES6 notation).
    n = len(int_part) + exponent
    stripped = digits.lstrip("0")
    n -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        out = digits + "0" * (n - k)
    elif 0 < n <= 21:
        out = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        out = "0." + "0" * (-n) + digits
    else:
        e = n - 1
        exp_sign = "+" if e >= 0 else "-"
        head = digits[0] if k == 1 else digits[0] + "." + digits[1:]
        out = f"{head}e{exp_sign}{abs(e)}"
    return sign + out


def _string(value: str) -> str:
    if _SURROGATE.search(value) is not None:
        raise SurrogateError("lone surrogate in string (RFC 8785 §3.2.2.2)", value)
    return _encode_string(value)


def _key_order(key: str) -> bytes:
    return key.encode("utf-16-be")


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
            raise NestingDepthError(f"nesting deeper than {MAX_DEPTH} levels")
        for key in value:
            if type(key) is not str:
                raise UnsupportedTypeError(
                    f"object key must be str, not {type(key).__name__}", key
                )
            if _SURROGATE.search(key) is not None:
                raise SurrogateError("lone surrogate in object key (RFC 8785 §3.2.2.2)", key)
        parts.append("{")
        first = True
        for key in sorted(value, key=_key_order):  # RFC 8785 §3.2.3: UTF-16 code units
            if not first:
                parts.append(",")
            first = False
            parts.append(_encode_string(key))
            parts.append(":")
            _encode(value[key], parts, depth + 1)
        parts.append("}")
    elif t is list or t is tuple:
        if depth >= MAX_DEPTH:
            raise NestingDepthError(f"nesting deeper than {MAX_DEPTH} levels")
        parts.append("[")
        first = True
        for item in value:
            if not first:
                parts.append(",")
            first = False
            _encode(item, parts, depth + 1)
        parts.append("]")
    else:
        raise UnsupportedTypeError(
            f"{t.__name__} has no canonical JSON form (RFC 8785 §3.1)", value
        )


def dumps(value: Any) -> bytes:
    """Serialize a JSON value to its RFC 8785 canonical bytes.

    Args:
        value: ``dict`` (``str`` keys only), ``list``, ``tuple``, ``str``, ``int``, ``float``,
            ``bool`` or ``None``, nested at most ``MAX_DEPTH`` deep.

    Returns:
        UTF-8 bytes with no whitespace, keys sorted by UTF-16 code units (RFC 8785 §3.2.3),
        numbers in ES6 form (§3.2.2.3), minimal string escaping (§3.2.2.2). No trailing newline.

    Raises:
        UnsupportedTypeError: a value of another type, or a non-``str`` object key.
        IntegerDomainError: an ``int`` outside +-(2**53 - 1).
        FloatDomainError: NaN or +-Infinity.
        SurrogateError: a lone surrogate in a string or key.
        NestingDepthError: nesting deeper than ``MAX_DEPTH``.
    """
    parts: list[str] = []
    try:
        _encode(value, parts, 0)
    except RecursionError as exc:
        raise NestingDepthError("nesting too deep for the interpreter's stack") from exc
    return "".join(parts).encode("utf-8")


def digest(value: Any) -> str:
    """SHA-256 of ``dumps(value)``: the id of a JSON value.

    Returns:
        64-char lowercase hex.

    Raises:
        The same errors as :func:`dumps`.
    """
    return hashlib.sha256(dumps(value)).hexdigest()


# --- strict parsing ------------------------------------------------------------------------


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"duplicate object key {key!r} (RFC 8785 §3.1)", key)
            seen.add(key)
    return obj


def _reject_constant(name: str) -> Any:
    raise FloatDomainError(f"{name} is not a JSON number (RFC 8785 §3.2.2.3)", name)


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise FloatDomainError(f"number {text[:40]!r} overflows to infinity", text[:40])
    return value


def _parse_int(text: str) -> int | float:
    digits = len(text) - (text[0] == "-")
    if digits <= 16:
        value = int(text)
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
    # Beyond 2**53 - 1: accepted only when the literal is already the canonical form of the
    # nearest double (DESIGN section 2), so that dumps(loads(b)) == b for canonical b.
    as_float = float(text)
    if not math.isfinite(as_float):
        raise FloatDomainError(f"integer literal {text[:40]!r} overflows to infinity", text[:40])
    if format_number(as_float) == text:
        return as_float
    raise IntegerDomainError(
        f"integer literal {text[:40]!r} is outside +-(2**53 - 1) and not an exact double",
        text[:40],
    )


def _max_depth(text: str) -> int:
    depth = deepest = 0
    in_string = escaped = False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif ch in "]}":
            depth -= 1
    return deepest


def _check_surrogates(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        t = type(item)
        if t is str:
            if _SURROGATE.search(item) is not None:
                raise SurrogateError("lone surrogate escape in string (RFC 8785 §3.2.2.2)", item)
        elif t is dict:
            for key, sub in item.items():
                if _SURROGATE.search(key) is not None:
                    raise SurrogateError("lone surrogate escape in key (RFC 8785 §3.2.2.2)", key)
                stack.append(sub)
        elif t is list:
            stack.extend(item)


def loads(data: bytes | bytearray | str) -> Any:
    """Parse JSON text strictly into a value inside the canonical domain.

    Args:
        data: UTF-8 bytes (no byte-order mark) or a ``str``.

    Returns:
        ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``. A number literal with a
        fraction or exponent is a ``float``; an integer literal within +-(2**53 - 1) is an
        ``int``; a larger one is a ``float`` only if it is exactly the ES6 form of a double.

    Raises:
        EncodingError: invalid UTF-8, or a leading byte-order mark.
        JSONSyntaxError: not JSON, trailing data, or an empty document.
        DuplicateKeyError: an object names a key twice.
        FloatDomainError: ``NaN``/``Infinity`` literals, or a number that overflows.
        IntegerDomainError: an integer literal beyond 2**53 that is not an exact double.
        SurrogateError: a lone-surrogate escape such as ``"\\ud800"``.
        NestingDepthError: nesting deeper than ``MAX_DEPTH``.
    """
    if isinstance(data, (bytes, bytearray)):
        if data[:3] == b"\xef\xbb\xbf":
            raise EncodingError("JSON text starts with a UTF-8 byte-order mark")
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EncodingError(f"invalid UTF-8 at byte offset {exc.start}", exc.start) from exc
    elif isinstance(data, str):
        text = data
        if text[:1] == "\ufeff":
            raise EncodingError("JSON text starts with a byte-order mark")
    else:
        raise UnsupportedTypeError(f"loads takes bytes or str, not {type(data).__name__}", data)
    if (text.count("[") + text.count("{") > MAX_DEPTH) and _max_depth(text) > MAX_DEPTH:
        raise NestingDepthError(f"nesting deeper than {MAX_DEPTH} levels")
    try:
        value = json.loads(
            text,
            object_pairs_hook=_reject_duplicates,
            parse_constant=_reject_constant,
            parse_float=_parse_float,
            parse_int=_parse_int,
        )
    except json.JSONDecodeError as exc:
        raise JSONSyntaxError(f"not JSON: {exc.msg} at offset {exc.pos}", pos=exc.pos) from exc
    except RecursionError as exc:
        raise NestingDepthError("nesting too deep for the interpreter's stack") from exc
    if _SURROGATE.search(text) is not None or _SURROGATE_ESCAPE.search(text) is not None:
        _check_surrogates(value)
    return value
