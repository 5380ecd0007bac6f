"""Strict JSON parsing into the canonical domain (DESIGN section 2, RFC 8785 §3.1 / I-JSON).

Two paths give the same values and the same errors:

* ``loads_reference``, the careful path: the stdlib C scanner with the checks it lacks added
  around it (an ``object_pairs_hook`` per object for duplicate keys, ``parse_constant`` for
  ``NaN``/``Infinity``, Python number callbacks when a literal may leave the domain, a regex
  for lone-surrogate escapes, a bracket count for nesting depth). It decides every error.
* ``loads``, the fast path: a few C-speed passes over the UTF-8 bytes prove that the rare
  conditions cannot occur, then the C scanner parses with no hook but a key counter (or, in
  long texts of few objects, the per-object pairs check); anything it cannot prove (or any
  error at all) goes to ``loads_reference``, which parses again and gives the answer. What the
  fast path proves, and why it is enough (details at "Fast path" below):

  - numbers: every integer literal has at most 15 digits and no exponent has 3 digits, so
    the C scanner's ``int``/``float`` are exactly what the checked callbacks would return;
  - duplicate keys: ``S``, the number of keys in the parsed dicts (counted by an
    ``object_hook``), is at most ``P``, the number of name/value pairs in the text, with
    equality exactly when no object repeats a key; ``U`` (below) is at least ``P``, so
    ``S == U`` proves there is no duplicate;
  - nesting: a valid text nested deeper than ``MAX_DEPTH`` holds more than ``MAX_DEPTH``
    opening brackets; lone surrogates: only a ``\\ud``/``\\uD`` escape can make one.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable
from itertools import accumulate
from json.scanner import c_make_scanner  # type: ignore[attr-defined]
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
# The same without its backslash, for texts dense in backslashes (_surrogate_escape).
_SURROGATE_TAIL: Final = re.compile(rb"u[dD][89abcdefABCDEF]")
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


def _exact(data: Any) -> Any:
    """``data`` as an exact ``bytes`` or ``str`` holding the same characters or bytes, read
    without any method a subclass may override (``encode``, ``__len__``, ``__bytes__``);
    anything else unchanged (then refused by the caller)."""
    t = type(data)
    if t is bytes or t is str:
        return data
    if isinstance(data, (bytes, bytearray)):
        return bytes(memoryview(data))  # the buffer itself, never __bytes__
    if isinstance(data, str):
        return str.__str__(data)  # an exact copy of the characters
    return data


def loads_reference(data: bytes | bytearray | str) -> Any:
    """The careful path of ``canonical.loads``: the reference the fast path is tested against."""
    data = _exact(data)
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


# --- Fast path ---------------------------------------------------------------------------
#
# Every pass over the bytes costs a quarter to a third of a nanosecond per byte, about a tenth
# of what json.loads spends on string-heavy text, so the fast path runs as few as it can and
# prefers single-byte searches (memchr speed) and checks on what the C scanner reports.
#
# * numbers, on the "number shape" (_NUMBER_SHAPE): every digit is "0", "E" and "+" are "e",
#   "D" is "d", and the bytes that can stand right before a number's integer part outside a
#   string (whitespace, ",", ":", "[", "-"; and "{") are '"'. Outside strings, a run of "0" is
#   an integer part (after '"', or at the very start of the text), a fraction (after ".") or
#   an exponent (after "e", or '"', the shape of "-"). So if the shape holds neither '"' + 16
#   zeros nor "e000", every integer part not at the start has at most 15 digits (inside
#   +-(2**53 - 1), below the int() digit limit) and every exponent at most 2 digits, so no
#   value can overflow (a float needs 16+ integer digits or a 3+ digit exponent for that; an
#   exponent after "-" only underflows, as in the careful path): the C scanner's int and float
#   are what the checked callbacks return. A number at the very start is the whole text, and
#   its parsed value is checked instead. Hits inside strings are false alarms that only select
#   the checked callbacks. Long texts whose middle shows few colons and digits (chat turns:
#   long strings, few numbers) skip the shape and parse with the checked callbacks directly.
# * keys: S, the keys of the parsed dicts (counted by an object_hook), is at most P, the
#   name/value pairs of the text, and equal only if no object repeats a key. Any U >= P with
#   S == U proves there is none: first U = every ":" in the text, then the colons after a
#   quote in _FAST_SHAPE (a pair's colon follows its name's closing quote, or whitespace,
#   which that shape writes as a quote), then _pairs_bound, then _pairs_bound of the text
#   without escapes (JSON inside a string: '\\"key\\":'). Long texts whose middle shows few
#   colons (long strings, few objects) check each object's pairs instead (_pairs, which raises
#   and so falls back): there a bound would cost passes over the strings.
# * surrogates: a lone surrogate can only come from a "\\ud800"-"\\udfff" escape, and escapes
#   lie between the first and the last backslash (two memchr searches; none: nothing to do).
#   There "\\ud" is searched in the number shape, or, with no shape, the careful path's pattern
#   (or, in texts dense in backslashes, what follows the backslash); a hit counts unless its
#   backslash is itself escaped (_surrogate_escape).
# * nesting: a valid text deeper than MAX_DEPTH holds more than MAX_DEPTH arrays and objects.
#   Its bytes include 2 per object, 2 per array and 3 per key (two quotes and a colon), so
#   objects + arrays <= (bytes - 3 * keys) / 2: with the hook's key count, most texts need no
#   pass at all. Otherwise the hook's object count plus the "[" bytes (none if a memchr finds
#   none) bound it, and past that _within_max_depth or the careful path's _too_deep decides.
#   The depth is proven after the scan: a text too deep for the interpreter's stack makes the
#   C scanner raise RecursionError, which falls back like any other error.
_NUMBER_SHAPE: Final = bytes.maketrans(b"0123456789E+D \t\n\r,:[{-", b"0000000000eed" + b'"' * 9)
_SIXTEEN_AFTER_QUOTE: Final = b'"' + _SIXTEEN_DIGITS
_SURROGATE_PREFIX: Final = b"\\ud"  # "\\uD" in the number shape too
_FAST_SHAPE: Final = bytes.maketrans(b"0123456789E+{ \t\n\r", b"0000000000ee[" + b'"' * 4)
_WHITESPACE: Final = " \t\n\r"
# Brackets only, "{" read as "[" and "}" as "]"; quotes kept to see whether any string holds one.
_BRACKETS: Final = bytes.maketrans(b"{}", b"[]")
_NOT_BRACKET_OR_QUOTE: Final = bytes(set(range(256)) - set(b'"[]{}'))
# Texts longer than _LONG bytes are sampled: _SAMPLE bytes in the middle. Fewer colons there
# than one per _BYTES_PER_COLON_FOR_PAIRS bytes (long strings, few objects): each object's
# pairs are checked for a repeated key rather than keys counted (a bound on the pairs would
# cost passes over the strings); if the sample also holds at most _SPARSE_DIGITS digits, the
# numbers are parsed with the checked callbacks (a Python call per number) and the number
# shape is skipped; more than _SPARSE_BACKSLASHES backslashes: _surrogate_escape's "dense"
# search. _FEW_BRACKETS: "[" bytes found one by one before counting the rest (_brackets).
_LONG: Final = 2 * MAX_DEPTH
_SAMPLE: Final = 256
_BYTES_PER_COLON_FOR_PAIRS: Final = 32
_SPARSE_DIGITS: Final = 64
_SPARSE_BACKSLASHES: Final = 8
_FEW_BRACKETS: Final = 4
_DIGITS: Final = b"0123456789"


def _unescaped(raw: bytes) -> bytes:
    """``raw`` without its escaped backslashes and escaped quotes (only valid for JSON text).

    Escapes are read left to right and a backslash never follows one that ends an escape, so
    removing every "\\\\" leaves of each run of backslashes one backslash that escapes the next
    character, or none; a quote after a backslash is then an escaped quote.
    """
    return raw.replace(b"\\\\", b"").replace(b'\\"', b"")


def _surrogate_escape(
    raw: bytes, start: int = 0, end: int | None = None, dense: bool = False
) -> bool:
    """Whether JSON ``raw`` holds a ``\\uD800``-``\\uDFFF`` escape: a match of the careful path's
    pattern whose backslash starts an escape when the text is read left to right, that is
    ends an odd run of backslashes ("\\\\ud800" is an escaped backslash and "ud800").

    Only ``raw[start:end]`` is searched (escapes lie between the first and the last
    backslash). ``dense``: the text is rich in backslashes, so search for what follows one
    ("u", "d", a hex digit: rarer), then look back for the backslash.
    """
    pattern, back = (_SURROGATE_TAIL, 1) if dense else (_SURROGATE_ESCAPE, 0)
    for match in pattern.finditer(raw, start, len(raw) if end is None else end):
        slash = first = match.start() - back
        if first < 0 or raw[slash] != 0x5C:
            continue
        while first and raw[first - 1] == 0x5C:  # the run of backslashes ending at slash
            first -= 1
        if (slash - first) % 2 == 0:
            return True
    return False


def _pairs_bound(raw: bytes, shape: bytes) -> int:
    """An upper bound of the name/value pairs in valid JSON ``raw`` (``shape`` is its _FAST_SHAPE).

    Each pair's colon follows the name's closing quote either directly (a '":' in ``raw``) or
    after whitespace (then the shape holds two quote-likes before it: '"":'); a colon inside a
    string only adds to the bound, and ``"a ? b : c"`` (one space) adds nothing.
    """
    return raw.count(b'":') + shape.count(b'"":')


def _keys_proven(raw: bytes, keys: int) -> bool:
    """Whether ``keys``, the keys of the dicts parsed from valid JSON ``raw``, proves that no
    object repeats a key: it equals an upper bound of the text's name/value pairs."""
    shape = raw.translate(_FAST_SHAPE)
    if keys == shape.count(b'":') or keys == _pairs_bound(raw, shape):
        return True
    if b"\\" not in raw:
        return False
    clean = _unescaped(raw)
    return keys == _pairs_bound(clean, clean.translate(_FAST_SHAPE))


def _brackets(raw: bytes) -> int:
    """The "[" bytes of ``raw`` (at least its arrays): found one by one (memchr) while there are
    few, as in most texts of long strings, then counted."""
    at = raw.find(b"[")
    found = 0
    while at >= 0:
        found += 1
        if found == _FEW_BRACKETS:
            return found + raw.count(b"[", at + 1)
        at = raw.find(b"[", at + 1)
    return found


def _within_max_depth(raw: bytes) -> bool | None:
    """Whether valid JSON ``raw`` nests at most ``MAX_DEPTH`` deep; ``None`` if not cheaply known.

    The bracket skeleton (strings removed) is peeled: each pass removes every adjacent "[]",
    that is every node whose children were all removed before, so a balanced skeleton is empty
    after exactly its depth in passes. Strings are removed as "" pairs once everything but
    brackets and quotes is deleted, which is exact only if no string holds a bracket (else
    ``None``); the passes stop at a budget of 8 times the skeleton's size (else ``None``).
    """
    skeleton = _unescaped(raw) if b"\\" in raw else raw
    skeleton = skeleton.translate(_BRACKETS, _NOT_BRACKET_OR_QUOTE).replace(b'""', b"")
    if b'"' in skeleton:
        return None
    budget = 8 * len(skeleton)
    for _ in range(MAX_DEPTH):
        if not skeleton:
            return True
        budget -= len(skeleton)
        peeled = skeleton.replace(b"[]", b"")
        if len(peeled) == len(skeleton) or budget < 0:
            return None
        skeleton = peeled
    return not skeleton


class _ScanContext:
    """The attributes the C scanner reads; plain ``int``/``float`` select its C number path."""

    strict = True
    parse_constant = staticmethod(_constant)

    def __init__(
        self,
        object_hook: Callable[[dict[str, Any]], Any] | None,
        object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None,
        checked: bool,
    ) -> None:
        self.object_hook = object_hook
        self.object_pairs_hook = object_pairs_hook
        self.parse_float: Callable[[str], Any] = _parse_float if checked else float
        self.parse_int: Callable[[str], Any] = _parse_int if checked else int
        self.memo: dict[str, str] = {}


_Scan = Callable[[str, bool, bool], "tuple[Any, int, int, int] | None"]


def _make_counting_scan() -> _Scan:
    """A scanner for one thread: ``scan(text, checked, by_pairs)`` gives (value, end, keys in
    all objects, objects).

    ``checked`` selects the careful path's number callbacks; ``by_pairs`` also checks each
    object's pairs for a repeated key (raising DuplicateKeyError; then ``keys`` counts the
    pairs). Gives ``None`` when called again while it runs on this thread (a
    signal handler parsing in the middle of a parse), so that counts are never shared by two
    parses.
    """
    keys = objects = 0
    busy = False

    def count(obj: dict[str, Any]) -> dict[str, Any]:
        nonlocal keys, objects
        keys += len(obj)
        objects += 1
        return obj

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        nonlocal keys, objects
        obj = dict(items)
        if len(obj) != len(items):
            _pairs(items)  # raises DuplicateKeyError
        keys += len(items)
        objects += 1
        return obj

    # Indexed by checked + 2 * by_pairs.
    scanners = [
        c_make_scanner(
            _ScanContext(None if by_pairs else count, pairs if by_pairs else None, checked)
        )
        for by_pairs in (False, True)
        for checked in (False, True)
    ]

    def scan(text: str, checked: bool, by_pairs: bool) -> tuple[Any, int, int, int] | None:
        nonlocal keys, objects, busy
        if busy:
            return None
        busy = True
        keys = objects = 0
        try:
            value, end = scanners[checked + 2 * by_pairs](text, 0)
        finally:
            busy = False
        return value, end, keys, objects

    return scan


class _PerThread(threading.local):
    def __init__(self) -> None:
        self.scan = _make_counting_scan()


_per_thread: Final = _PerThread()


def loads(data: bytes | bytearray | str) -> Any:
    """Implementation of ``canonical.loads`` (see its docstring): the fast path.

    Same values and errors as :func:`loads_reference`, which it calls whenever it cannot prove
    that the input is free of every condition the careful path checks (see the comment above).
    """
    # A byte-order mark needs no test: the C scanner refuses it, and the careful path answers.
    if type(data) is not bytes and type(data) is not str:
        data = _exact(data)  # a subclass's overridden methods are never called
    if type(data) is bytes:
        raw = data
        try:
            text = raw.decode()
        except UnicodeDecodeError:
            return loads_reference(data)
    elif type(data) is str:
        text = data
        try:
            raw = text.encode()
        except UnicodeEncodeError:  # raw lone surrogates
            return loads_reference(data)
    else:
        return loads_reference(data)
    size = len(raw)
    shape = None
    middle = b""
    if size > _LONG:
        low = (size - _SAMPLE) >> 1
        by_pairs = raw.count(b":", low, low + _SAMPLE) * _BYTES_PER_COLON_FOR_PAIRS < _SAMPLE
        if by_pairs:
            middle = raw[low : low + _SAMPLE]
            checked = _SAMPLE - len(middle.translate(None, _DIGITS)) <= _SPARSE_DIGITS
        else:
            checked = False
    else:
        checked = by_pairs = False
    if not checked:
        shape = raw.translate(_NUMBER_SHAPE)
        checked = shape.rfind(b"e000") >= 0 or shape.rfind(_SIXTEEN_AFTER_QUOTE) >= 0
    first = raw.find(b"\\")
    if first >= 0:  # escapes lie between the first and the last backslash (memchr both)
        last = raw.rfind(b"\\") + 6
        if shape is not None:
            if shape.rfind(_SURROGATE_PREFIX, first, last) >= 0 and _surrogate_escape(raw):
                return loads_reference(data)
        elif _surrogate_escape(raw, first, last, middle.count(b"\\") > _SPARSE_BACKSLASHES):
            return loads_reference(data)
    try:
        scanned = _per_thread.scan(text, checked, by_pairs)
    except Exception:
        return loads_reference(data)
    if scanned is None:
        return loads_reference(data)
    value, end, keys, objects = scanned
    if end != len(text) and text[end:].strip(_WHITESPACE):
        return loads_reference(data)
    # The shape sees no quote-like before a number at the very start of the text, so a number
    # as the whole text is checked here (the C scanner's int is exact; a float only overflows).
    if type(value) is int:
        if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return loads_reference(data)
    elif type(value) is float and value - value != 0.0:
        return loads_reference(data)
    if (
        size - 3 * keys > 2 * MAX_DEPTH
        and objects + (_brackets(raw) if by_pairs else raw.count(b"[")) > MAX_DEPTH
    ):
        within = _within_max_depth(raw)
        if within is None:
            within = not _too_deep(text)
        if not within:
            return loads_reference(data)
    if keys and not by_pairs and keys != raw.count(b":") and not _keys_proven(raw, keys):
        return loads_reference(data)
    return value
