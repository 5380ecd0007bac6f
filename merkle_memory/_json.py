"""Private JSON helpers shared by every layer: the 64-hex id pattern, the strict stdlib
decoder for files this library reads back, and checking and copying parsed JSON values held
inside content blocks and node metadata.

A value with no JSON meaning is reported as a :class:`~merkle_memory.errors.ContentBlockError`
(the model error of the values a block holds) unless the caller names its own error class
(``error=``): a node's metadata is a ``NodeFormatError``, an importer's value a
``TranscriptFormatError``. The message text is the same whichever class carries it.

Hot path of every import: exact built-in types are handled first with ``type(x) is T`` tests
and leaf values are checked inline; subclasses and other types take the general (slower)
branch, with the same results and errors as before.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from .canonical import MAX_DEPTH, MAX_SAFE_INTEGER
from .errors import ContentBlockError, MerkleMemoryError

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


ErrorClass = Callable[[str], MerkleMemoryError]
"""An error class that takes a message, e.g. ``TranscriptFormatError``."""


def _surrogate_error(where: str) -> ContentBlockError:
    return ContentBlockError(f"{where}: lone UTF-16 surrogate in a string")


def check_text(value: str, where: str, error: ErrorClass = ContentBlockError) -> str:
    """Return ``value`` unchanged, or raise ``error`` if it holds a lone surrogate.

    Raises:
        ContentBlockError: (or ``error``) ``value`` holds a lone UTF-16 surrogate; the text
            is ``"<where>: lone UTF-16 surrogate in a string"``.
    """
    if not value.isascii() and _SURROGATE.search(value) is not None:
        raise error(f"{where}: lone UTF-16 surrogate in a string")
    return value


def _copy_dict(value: Mapping[Any, Any], where: str, depth: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, item in value.items():
        if type(key) is not str and not isinstance(key, str):
            raise ContentBlockError(f"{where}: object key {key!r} is not a string")
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
            out[key] = _copy(item, where, depth + 1)
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
            append(_copy(item, where, depth + 1))
    return out


def _copy(value: Any, where: str, depth: int) -> Any:
    """:func:`json_copy` at nesting ``depth``, raising :class:`ContentBlockError`."""
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
            raise ContentBlockError(f"{where}: integer too large for a double") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ContentBlockError(f"{where}: NaN or infinity is not a JSON number")
        return value
    if depth >= MAX_DEPTH:
        raise ContentBlockError(f"{where}: nested deeper than {MAX_DEPTH}")
    if isinstance(value, Mapping):
        return _copy_dict(value, where, depth)
    if isinstance(value, list | tuple):
        return _copy_list(value, where, depth)
    raise ContentBlockError(f"{where}: {type(value).__name__} is not a JSON value")


def json_copy(value: Any, where: str, error: ErrorClass = ContentBlockError) -> Any:
    """Return a fresh copy of a JSON value with every number an IEEE double where it must be.

    Integers beyond +-(2**53 - 1) become the nearest float (tapes decodes JSON numbers as
    float64, DESIGN section 3); tuples become lists; dicts and lists are copied so that later
    changes to the caller's object cannot change a frozen block.

    Args:
        value: the value to copy.
        where: what the value is, for the error text (``"block field 'tool_input'"``).
        error: the error class to raise (called with the message).

    Raises:
        ContentBlockError: (or ``error``, with the same text) a value with no JSON meaning (a
            set, bytes, a non-``str`` key, NaN or infinity, a lone surrogate, an integer too
            large for a double) or nesting deeper than ``canonical.MAX_DEPTH``.
    """
    try:
        return _copy(value, where, 0)
    except ContentBlockError as exc:
        if error is ContentBlockError:
            raise
        raise error(str(exc)) from None
