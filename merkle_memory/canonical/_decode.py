"""Strict JSON parsing into the canonical domain (DESIGN section 2, RFC 8785 §3.1 / I-JSON).

The stdlib C scanner does the parsing; the checks it lacks are added around it, so the common
path runs no per-character Python loop:

* duplicate keys: an ``object_pairs_hook`` per object;
* ``NaN``/``Infinity`` literals: ``parse_constant``;
* number domain: a regex over the text decides whether any literal can leave the domain (16 or
  more digits in a row, or a 3-digit exponent); only then are numbers parsed by Python
  callbacks that check range, overflow and the exact-double rule for big integer literals;
* lone surrogates: a regex over the text, then a walk over the parsed strings only if it hits;
* nesting depth: counted on the text (strings removed by one linear regex) only when the text
  holds more than ``MAX_DEPTH`` brackets at all.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any, Final

from ..errors import (
    DuplicateKeyError,
    EncodingError,
    FloatDomainError,
    IntegerDomainError,
    JSONSyntaxError,
    NestingDepthError,
    SurrogateError,
    UnsupportedTypeError,
)
from ._encode import MAX_DEPTH, MAX_SAFE_INTEGER, SURROGATE, format_number

# Pre-checks run on the UTF-8 bytes with C-speed bytes methods (str regexes cost ~20 ns a
# character). _SHAPE maps every digit to "0", "E" to "e" and "{" to "[", and deletes "+" and
# "-"; then a number literal can leave the canonical domain only if the result holds 16
# zeros in a row (an integer beyond 2**53 - 1 needs 16 digits, the int() digit limit starts at
# 4301, a value overflowing to infinity needs 16+ digits or ...) or "e000" (... an exponent of
# 3+ digits). Hits inside strings are false alarms that only select the checked decoder.
_SHAPE: Final = bytes.maketrans(b"0123456789E{", b"0000000000e[")
_SIXTEEN_DIGITS: Final = b"0" * 16
# A \uD800-\uDFFF escape (or a false alarm such as an escaped backslash before "ud800").
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89abcdefABCDEF]")
# One JSON string, or an unterminated one up to the end: linear, never rescans.
_STRING: Final = re.compile(r'"(?:[^"\\]|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET: Final = re.compile(r"[^\[\]{}]+")
_DELTA: Final = {"[": 1, "{": 1, "]": -1, "}": -1}


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKeyError(f"duplicate object key {key!r} (RFC 8785 §3.1)", key)
            seen.add(key)
    return obj


def _constant(name: str) -> Any:
    raise FloatDomainError(f"{name} is not a JSON number (RFC 8785 §3.2.2.3)", name)


def _parse_float(text: str) -> float:
    value = float(text)
    if value - value != 0.0:  # +-Infinity (NaN cannot come from a JSON literal)
        raise FloatDomainError(f"number {text[:40]!r} overflows to infinity", text[:40])
    return value


def _parse_int(text: str) -> int | float:
    if len(text) - (text[0] == "-") <= 16:
        value = int(text)
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
    # Beyond 2**53 - 1: accepted only when the literal is already the canonical form of the
    # nearest double (DESIGN section 2), so that dumps(loads(b)) == b for canonical b.
    as_float = float(text)  # no int() digit limit on this path
    if not math.isfinite(as_float):
        raise FloatDomainError(f"integer literal {text[:40]!r} overflows to infinity", text[:40])
    if format_number(as_float) == text:
        return as_float
    raise IntegerDomainError(
        f"integer literal {text[:40]!r} is outside +-(2**53 - 1) and not the exact ES6 form "
        "of a double; store big integers as strings",
        text[:40],
    )


_PLAIN: Final = json.JSONDecoder(object_pairs_hook=_pairs, parse_constant=_constant)
_CHECKED: Final = json.JSONDecoder(
    object_pairs_hook=_pairs,
    parse_constant=_constant,
    parse_float=_parse_float,
    parse_int=_parse_int,
)


def nesting_depth(text: str) -> int:
    """Deepest nesting of arrays and objects in JSON ``text`` (brackets in strings ignored).

    Linear time on any input, valid JSON or not (an unterminated string runs to the end).
    """
    skeleton = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_DELTA.__getitem__, skeleton)), default=0)


def _too_deep(text: str) -> bool:
    """Whether ``text`` nests deeper than ``MAX_DEPTH``, looking at growing prefixes first.

    The bracket skeleton of a prefix is a prefix of the whole text's skeleton (a string left
    open at the cut hides only brackets that lie inside that same string in the whole text),
    so a prefix already too deep proves the whole text too deep: hostile inputs such as 100 MB
    of ``[`` are refused after reading 64 KiB, while valid texts still get one exact scan.
    """
    for size in (1 << 16, 1 << 22):
        if len(text) <= size:
            break
        if nesting_depth(text[:size]) > MAX_DEPTH:
            return True
    return nesting_depth(text) > MAX_DEPTH


def _check_surrogates(value: Any) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        t = type(item)
        if t is str:
            if SURROGATE.search(item) is not None:
                raise SurrogateError("lone surrogate in string (RFC 8785 §3.2.2.2)", item)
        elif t is dict:
            for key, sub in item.items():
                if SURROGATE.search(key) is not None:
                    raise SurrogateError("lone surrogate in object key (RFC 8785 §3.2.2.2)", key)
                stack.append(sub)
        elif t is list:
            stack.extend(item)


def loads(data: bytes | bytearray | str) -> Any:
    """Implementation of ``canonical.loads`` (see its docstring)."""
    surrogates = False
    if isinstance(data, (bytes, bytearray)):
        raw = bytes(data)
        if raw[:3] == b"\xef\xbb\xbf":
            raise EncodingError("JSON text starts with a UTF-8 byte-order mark (RFC 8785 §3.2.4)")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise EncodingError(
                f"invalid UTF-8 at byte offset {exc.start}: {exc.reason}", exc.start
            ) from exc
    elif isinstance(data, str):
        text = data
        if text[:1] == "\ufeff":
            raise EncodingError("JSON text starts with a byte-order mark")
        try:
            raw = text.encode("utf-8")
        except UnicodeEncodeError:  # raw lone surrogates: parse, then name the string
            raw = text.encode("utf-8", "surrogatepass")
            surrogates = True
    else:
        raise UnsupportedTypeError(f"loads takes bytes or str, not {type(data).__name__}", data)
    shape = raw.translate(_SHAPE, b"+-")
    if shape.count(b"[") > MAX_DEPTH and _too_deep(text):
        raise NestingDepthError(f"nesting deeper than {MAX_DEPTH} levels (canonical.MAX_DEPTH)")
    risky = _SIXTEEN_DIGITS in shape or b"e000" in shape
    decoder = _CHECKED if risky else _PLAIN
    try:
        value = decoder.decode(text)
    except json.JSONDecodeError as exc:
        raise JSONSyntaxError(
            f"not JSON: {exc.msg} at offset {exc.pos}", text[exc.pos : exc.pos + 20], exc.pos
        ) from exc
    except RecursionError as exc:
        raise NestingDepthError("nesting too deep for the interpreter's stack") from exc
    if surrogates or _SURROGATE_ESCAPE.search(raw) is not None:
        _check_surrogates(value)
    return value
