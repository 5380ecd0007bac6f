"""Private: checking and copying parsed JSON values held inside content blocks."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

from .canonical import MAX_DEPTH, MAX_SAFE_INTEGER
from .errors import TranscriptFormatError

_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def check_text(value: str, where: str) -> str:
    """Return ``value`` unchanged, or raise TranscriptFormatError if it holds a lone surrogate."""
    if _SURROGATE.search(value):
        raise TranscriptFormatError(f"{where}: lone UTF-16 surrogate in a string")
    return value


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
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise TranscriptFormatError(f"{where}: object key {key!r} is not a string")
            out[check_text(key, where)] = json_copy(item, where, depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [json_copy(item, where, depth + 1) for item in value]
    raise TranscriptFormatError(f"{where}: {type(value).__name__} is not a JSON value")
