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


MAX_VALUE_DEPTH: Final = MAX_DEPTH - 4
"""Deepest nesting of a JSON value held by the model: a content block's ``tool_input`` or
``content``, a node's metadata (the value itself is level 1, so ``{}`` is 1 and ``{"a": []}``
2). The node-hash preimage ``{"content": {"content": [block]}}`` holds a block's values four
levels down, so this is the one limit that keeps every canonical form the library hashes or
stores within ``canonical.MAX_DEPTH`` (512): 508 levels are accepted, 509 refused, by
:func:`json_copy` (so by ``ContentBlock``, ``Bucket``, ``Node`` and every importer) and never
as a ``RecursionError``: the value is walked without recursion."""


def depth_text(where: str) -> str:
    """The one text of a value nested deeper than :data:`MAX_VALUE_DEPTH`: ``"<where>: nested
    deeper than 508 levels (canonical.MAX_DEPTH - 4)"``."""
    return f"{where}: nested deeper than {MAX_VALUE_DEPTH} levels (canonical.MAX_DEPTH - 4)"


def _scalar(value: Any, where: str) -> Any:
    """The copy of a value that is not an exact ``dict``/``list``/``tuple``, or ``_CONTAINER``
    for a ``Mapping`` or ``list``/``tuple`` subclass (copied as a dict or list)."""
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
    if isinstance(value, Mapping | list | tuple):
        return _CONTAINER
    raise ContentBlockError(f"{where}: {type(value).__name__} is not a JSON value")


_CONTAINER: Final = object()
"""What :func:`_scalar` returns for a container (which the walk of :func:`_copy` copies)."""


def _check_key(key: Any, where: str) -> None:
    if not isinstance(key, str):
        raise ContentBlockError(f"{where}: object key {key!r} is not a string")
    if _SURROGATE.search(key) is not None:
        raise _surrogate_error(where)


def _copy(value: Any, where: str) -> Any:
    """:func:`json_copy` raising :class:`ContentBlockError`, with an explicit stack of the
    containers still to fill instead of recursion (so no depth can raise ``RecursionError``).

    Each container met gets its empty copy at once, in its place in its parent, and is filled
    when it comes off the stack, so keys and items keep their order whatever the order of
    filling. Leaves of the common exact types are checked inline (the hot path of every
    import); anything else goes through :func:`_scalar`. The object and array loops are a
    deliberate speed twin (one loop over ``enumerate`` for both costs a third more).
    """
    if not isinstance(value, Mapping | list | tuple):
        return _scalar(value, where)
    root: Any = {} if isinstance(value, Mapping) else []
    stack: list[tuple[Any, Any, int]] = [(value, root, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        source, out, depth = pop()
        if type(out) is dict:
            for key, item in source.items():
                if type(key) is not str or not key.isascii():
                    _check_key(key, where)
                t = type(item)
                if t is str:
                    if not item.isascii() and _SURROGATE.search(item) is not None:
                        raise _surrogate_error(where)
                    out[key] = item
                elif (
                    item is None
                    or t is bool
                    or (t is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)
                    or (t is float and item - item == 0.0)  # finite
                ):
                    out[key] = item
                else:
                    out[key] = _nested(item, t, where, depth, push)
        else:
            append = out.append
            for item in source:
                t = type(item)
                if t is str:
                    if not item.isascii() and _SURROGATE.search(item) is not None:
                        raise _surrogate_error(where)
                    append(item)
                elif (
                    item is None
                    or t is bool
                    or (t is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)
                    or (t is float and item - item == 0.0)  # finite
                ):
                    append(item)
                else:
                    append(_nested(item, t, where, depth, push))
    return root


def _nested(item: Any, t: type, where: str, depth: int, push: Callable[[Any], None]) -> Any:
    """The copy of a value inside a container at ``depth``: a scalar, or the empty copy of a
    container, pushed to be filled."""
    copy = _CONTAINER if t is dict or t is list else _scalar(item, where)
    if copy is not _CONTAINER:
        return copy
    if depth >= MAX_VALUE_DEPTH:
        raise ContentBlockError(depth_text(where))
    copy = {} if isinstance(item, Mapping) else []
    push((item, copy, depth + 1))
    return copy


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
            large for a double) or nesting deeper than :data:`MAX_VALUE_DEPTH` (a cyclic
            value included; text from :func:`depth_text`). Never ``RecursionError``.
    """
    try:
        return _copy(value, where)
    except ContentBlockError as exc:
        if error is ContentBlockError:
            raise
        raise error(str(exc)) from None


def plain_json(
    value: Any, where: str, error: ErrorClass = ContentBlockError, *, surrogates: bool = True
) -> Any:
    """:func:`json_copy` for a value the caller owns, e.g. one ``json.loads`` has just made:
    the value itself when the copy would equal it, else ``json_copy(value, where, error)``.

    The walk allocates nothing but its stack: it accepts exact ``dict`` (``str`` keys),
    ``list``, ``str``, ``int`` within +-(2**53 - 1), finite ``float``, ``bool`` and ``None``,
    nested at most :data:`MAX_VALUE_DEPTH` levels, and (unless ``surrogates`` is false) no
    lone surrogate in a string or key. Anything else (a large integer to turn into a float,
    a tuple, a subclass, NaN, a value too deep or cyclic, ...) goes to :func:`json_copy`,
    which makes the copy or raises its error, so results and errors are those of
    :func:`json_copy` (``tests/dag/test_fast_paths.py`` checks this against it).

    Args:
        value: the value; the caller gives it up (it must neither keep nor change it, since
            the result may be the value itself).
        where: as in :func:`json_copy`.
        error: as in :func:`json_copy`.
        surrogates: ``False`` when no string of ``value`` can hold a lone surrogate (text
            that ``json.loads`` parsed from UTF-8 without a ``\\ud`` escape, or already
            cleaned): strings are then not searched.

    Raises:
        ContentBlockError: (or ``error``) as :func:`json_copy`.
    """
    if _plain(value, surrogates):
        return value
    return json_copy(value, where, error)


def _plain(value: Any, surrogates: bool) -> bool:
    """Whether :func:`json_copy` of ``value`` would equal it (see :func:`plain_json`)."""
    t = type(value)
    if t is not dict and t is not list:
        return (
            (t is str and not (surrogates and has_surrogate(value)))
            or value is None
            or t is bool
            or (t is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
            or (t is float and value - value == 0.0)
        )
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        container, depth = pop()
        if type(container) is dict:
            for key in container:
                if type(key) is not str or (
                    surrogates and not key.isascii() and _SURROGATE.search(key) is not None
                ):
                    return False
            items = container.values()
        else:
            items = container
        for item in items:
            t = type(item)
            if t is str:
                if surrogates and not item.isascii() and _SURROGATE.search(item) is not None:
                    return False
            elif t is dict or t is list:
                if depth >= MAX_VALUE_DEPTH:
                    return False
                push((item, depth + 1))
            elif not (
                item is None
                or t is bool
                or (t is int and -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER)
                or (t is float and item - item == 0.0)  # finite
            ):
                return False
    return True
