"""Private JSON helpers shared by every layer: the 64-hex id pattern, the strict stdlib
decoder for files this library reads back, and checking and copying parsed JSON values held
inside content blocks.

Hot path of every import: exact built-in types are handled first with ``type(x) is T`` tests
and leaf values are checked inline; subclasses and other types take the general (slower)
branch, with the same results and errors as before.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, Final

from .canonical import MAX_DEPTH, MAX_SAFE_INTEGER
from .errors import TranscriptFormatError

HEX64: Final = re.compile(r"[0-9a-f]{64}")
"""A digest or id: exactly 64 lowercase hex characters (use with ``fullmatch``)."""


class NotStrictJSON(ValueError):
    """Text that plain ``json`` would accept but the strict decoder does not."""


def _reject_constant(name: str) -> Any:
    raise NotStrictJSON(f"{name} literal")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise NotStrictJSON("duplicate key")
    return obj


_STRICT: Final = json.JSONDecoder(
    parse_constant=_reject_constant, object_pairs_hook=_reject_duplicates
)


def strict_decode(text: str) -> Any:
    """Parse JSON text with the stdlib decoder, refusing duplicate keys and NaN/Infinity.

    The reader of files this library writes (ledger lines, record files): faster than
    :func:`merkle_memory.canonical.loads` and as strict where it matters for a hash (one value
    per key, no non-finite numbers); the canonical form itself is not required.

    Raises:
        ValueError: not JSON (``json.JSONDecodeError``) or a :class:`NotStrictJSON` case.
        RecursionError: nesting deeper than the interpreter's stack allows.
    """
    return _STRICT.decode(text)


_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def has_surrogate(value: str) -> bool:
    """Whether ``value`` holds a lone UTF-16 surrogate (an ASCII string never does)."""
    return not value.isascii() and _SURROGATE.search(value) is not None


def _surrogate_error(where: str) -> TranscriptFormatError:
    return TranscriptFormatError(f"{where}: lone UTF-16 surrogate in a string")


def check_text(value: str, where: str) -> str:
    """Return ``value`` unchanged, or raise TranscriptFormatError if it holds a lone surrogate."""
    if not value.isascii() and _SURROGATE.search(value) is not None:
        raise _surrogate_error(where)
    return value


def _copy_dict(value: Mapping[Any, Any], where: str, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if type(key) is not str and not isinstance(key, str):
            raise TranscriptFormatError(f"{where}: object key {key!r} is not a string")
        if not key.isascii() and _SURROGATE.search(key) is not None:
            raise _surrogate_error(where)
        t = type(item)
        if t is str:
            if not item.isascii() and _SURROGATE.search(item) is not None:
                raise _surrogate_error(where)
            out[key] = item
        elif (
            item is None
            or t is bool
            or (t is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)
        ):
            out[key] = item
        elif t is list and depth + 1 < MAX_DEPTH:
            out[key] = _copy_list(item, where, depth + 1)
        else:
            out[key] = json_copy(item, where, depth + 1)
    return out


def _copy_list(value: list[Any] | tuple[Any, ...], where: str, depth: int) -> list[Any]:
    out: list[Any] = []
    append = out.append
    for item in value:
        t = type(item)
        if t is str:
            if not item.isascii() and _SURROGATE.search(item) is not None:
                raise _surrogate_error(where)
            append(item)
        elif (
            item is None
            or t is bool
            or (t is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)
        ):
            append(item)
        else:
            append(json_copy(item, where, depth + 1))
    return out


def json_copy(value: Any, where: str, depth: int = 0) -> Any:
    """Return a fresh copy of a JSON value with every number an IEEE double where it must be.

    Integers beyond +-(2**53 - 1) become the nearest float (tapes decodes JSON numbers as
    float64, DESIGN section 3); tuples become lists; dicts and lists are copied so that later
    changes to the caller's object cannot change a frozen block.

    Raises:
        TranscriptFormatError: a value with no JSON meaning (a set, bytes, a non-``str`` key,
            NaN or infinity, a lone surrogate, an integer too large for a double) or nesting
            deeper than ``canonical.MAX_DEPTH``.
    """
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return check_text(value, where)
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        try:
            return float(value)
        except OverflowError:
            raise TranscriptFormatError(f"{where}: integer too large for a double") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise TranscriptFormatError(f"{where}: NaN or infinity is not a JSON number")
        return value
    if depth >= MAX_DEPTH:
        raise TranscriptFormatError(f"{where}: nested deeper than {MAX_DEPTH}")
    if isinstance(value, Mapping):
        return _copy_dict(value, where, depth)
    if isinstance(value, list | tuple):
        return _copy_list(value, where, depth)
    raise TranscriptFormatError(f"{where}: {type(value).__name__} is not a JSON value")
