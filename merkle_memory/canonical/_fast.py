"""RFC 8785 serialization, fast path: validate in Python, encode with the stdlib C encoder.

The C encoder of :mod:`json` (``sort_keys``, compact separators, ``ensure_ascii=False``)
already escapes strings exactly as RFC 8785 §3.2.2.2 requires, but on its own it differs from
RFC 8785 in six ways. ``encode_fast`` closes each of them, or gives up (returns ``None``) so
that the caller runs the plain path, which produces the bytes or raises the precise error:

1. Types: the C encoder accepts subclasses (``IntEnum``, str/dict/list subclasses) and
   stringifies non-str keys. A prior walk checks every type exactly; a subclass of ``str``,
   ``int`` or ``float`` is replaced by its base value in a copy of its container (read as
   ``_encode.json_base`` reads it, never through the subclass's own methods); any other type,
   and any key that is not exactly ``str`` -> plain.
2. Integers beyond +-(2**53 - 1): the walk checks the range -> plain (which raises).
3. Floats: the C encoder writes ``float.__repr__``. Non-integral floats with
   1e-4 <= |x| < 1e16 print the same in both forms and are left alone; integral floats with
   |x| < 1e16 (and -0.0) are replaced by the equal ``int`` in a copy of their container, whose
   repr is the ES6 form; every other finite float is replaced by a placeholder string that is
   swapped for ``format_number(x)`` after encoding; NaN/Infinity -> plain. A list or tuple of
   at least ``_FLOAT_RUN`` floats and nothing else, none of them integral (an embedding
   vector), is not walked: one C-speed pass (``float.is_integer`` over the items, which
   refuses any non-float) proves it, the C encoder writes it, and only the tokens holding an
   exponent (``repr`` of |x| < 1e-4) are rewritten with ``format_number``; the list's text
   then stands in its container as a placeholder, like a float's.
4. Key order: code-point order equals UTF-16 order unless a key holds a character beyond
   U+FFFF; the walk sends any such key -> plain.
5. Lone surrogates: found when the output is encoded to UTF-8 (it fails) -> plain.
6. Depth (and therefore cycles): the walk stops beyond ``MAX_DEPTH`` -> plain.

Containers are copied only along the path to a replaced float; the input is never mutated.
A top-level ``str`` is escaped by the same C escaper and encoded (point 5 holds for it too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Final

from ._encode import MAX_DEPTH, MAX_SAFE_INTEGER, encode_string, format_number

_ASTRAL: Final = re.compile("[\U00010000-\U0010ffff]")
# Placeholders hold lone surrogates, which no accepted string can contain, so a match in the
# output is one of ours unless the value was invalid anyway (then the count check fails).
_PLACEHOLDER: Final = re.compile('"\ud800([0-9]{1,9})\udfff"')


class _Fallback(Exception):
    """Internal: the value needs the plain path (it is invalid, or the C encoder can't do it)."""


def _refuse(obj: Any) -> Any:
    raise _Fallback  # the walk let an unknown type through; never expected


def _make_c_encoder() -> Callable[[Any], str] | None:
    maker = getattr(json.encoder, "c_make_encoder", None)
    if maker is None:  # an interpreter without the _json accelerator
        return None
    try:
        chunks = maker(None, _refuse, encode_string, None, ":", ",", True, False, False)
    except TypeError:  # a future signature: use the public encoder instead
        return None
    encode: Callable[[Any], str] = lambda value: "".join(chunks(value, 0))  # noqa: E731
    if encode({"b": [1, 2.5, "\x1f"], "a": None}) != '{"a":null,"b":[1,2.5,"\\u001f"]}':
        return None
    return encode


_c_encode = _make_c_encoder()
if _c_encode is None:  # pragma: no cover - CPython always has the accelerator
    _public = json.JSONEncoder(
        ensure_ascii=False,
        allow_nan=False,
        sort_keys=True,
        separators=(",", ":"),
        check_circular=False,
        default=_refuse,
    )
    _c_encode = _public.encode
_ENCODE: Final[Callable[[Any], str]] = _c_encode


def _float(value: float, subs: list[str]) -> Any:
    # Only called for floats whose repr differs from ES6 (see the module docstring, point 3).
    if value == 0.0:
        return 0
    if value != value or value - value != 0.0:  # NaN or +-Infinity
        raise _Fallback
    if -1e16 < value < 1e16 and value.is_integer():
        return int(value)
    subs.append(format_number(value))
    return f"\ud800{len(subs) - 1}\udfff"


_FLOAT_RUN: Final = 16
"""The shortest list tried as a run of floats (shorter ones cost less to walk)."""


def _float_run(value: list[Any] | tuple[Any, ...]) -> str | None:
    """The RFC 8785 text of ``value`` when it holds only non-integral floats (subclasses are
    read as their base value), else ``None``; NaN or Infinity -> ``None``."""
    try:
        if any(map(float.is_integer, value)):  # TypeError for any item that is not a float
            return None
        text = _ENCODE(value)  # ValueError for NaN or +-Infinity
    except (TypeError, ValueError):
        return None
    if "e" not in text:  # every token is repr of 1e-4 <= |x| < 1e16: the ES6 form already
        return text
    pieces: list[str] = []
    done = 0
    at = text.find("e")
    while at >= 0:  # a token with an exponent: |x| < 1e-4 (from 2**52 up, floats are integral)
        start = text.rfind(",", 0, at) + 1 or 1  # 1: the first token, after "["
        end = text.find(",", at)
        if end < 0:
            end = len(text) - 1  # the last token, before "]"
        pieces.append(text[done:start])
        pieces.append(format_number(float(text[start:end])))
        done = end
        at = text.find("e", end)
    pieces.append(text[done:])
    return "".join(pieces)


def _subclass(item: Any, subs: list[str]) -> Any:
    """The exact value replacing a subclass of ``str``, ``int`` or ``float`` in the copy (its
    base value, then handled as the walk handles that exact type); _Fallback for any other."""
    t = type(item)  # the real type: a spoofed ``__class__`` (a mock) goes to the plain path
    if issubclass(t, str):
        return str.__str__(item)  # a lone surrogate fails at UTF-8 encoding -> plain
    if issubclass(t, int):
        base = int.__index__(item)
        if -MAX_SAFE_INTEGER <= base <= MAX_SAFE_INTEGER:
            return base
        raise _Fallback
    if issubclass(t, float):
        value = float.__float__(item)
        if (1e-4 <= value < 1e16 or -1e16 < value <= -1e-4) and not value.is_integer():
            return value
        return _float(value, subs)
    raise _Fallback


def _check_key(key: Any) -> None:
    if type(key) is not str:
        raise _Fallback
    if not key.isascii() and _ASTRAL.search(key) is not None:
        raise _Fallback  # astral key: UTF-16 order differs from code-point order


def _dict(value: dict[Any, Any], depth: int, subs: list[str]) -> dict[Any, Any]:
    if depth >= MAX_DEPTH:
        raise _Fallback
    copy: dict[Any, Any] | None = None
    for key, item in value.items():
        if type(key) is not str or not key.isascii():
            _check_key(key)
        t = type(item)
        if t is str or t is bool or item is None:
            continue
        if t is int:
            if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            raise _Fallback
        if t is float:
            if (1e-4 <= item < 1e16 or -1e16 < item <= -1e-4) and not item.is_integer():
                continue
            new = _float(item, subs)
        elif t is dict:
            new = _dict(item, depth + 1, subs)
        elif t is list or t is tuple:
            new = _list(item, depth + 1, subs)
        else:
            new = _subclass(item, subs)
        if new is not item:
            if copy is None:
                copy = dict(value)
            copy[key] = new
    return value if copy is None else copy


def _list(value: list[Any] | tuple[Any, ...], depth: int, subs: list[str]) -> Any:
    # A deliberate speed twin of _dict's loop (same leaf tests, indices instead of keys): one
    # generic walker over (key, item) pairs costs about a third more per canonical dumps.
    if depth >= MAX_DEPTH:
        raise _Fallback
    if len(value) >= _FLOAT_RUN and type(value[0]) is float:
        text = _float_run(value)
        if text is not None:
            subs.append(text)
            return f"\ud800{len(subs) - 1}\udfff"
    copy: list[Any] | None = None
    index = -1  # counted by hand: enumerate's pairs cost about a tenth of the walk
    for item in value:
        index += 1
        t = type(item)
        if t is str or t is bool or item is None:
            continue
        if t is int:
            if -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
                continue
            raise _Fallback
        if t is float:
            if (1e-4 <= item < 1e16 or -1e16 < item <= -1e-4) and not item.is_integer():
                continue
            new = _float(item, subs)
        elif t is dict:
            new = _dict(item, depth + 1, subs)
        elif t is list or t is tuple:
            new = _list(item, depth + 1, subs)
        else:
            new = _subclass(item, subs)
        if new is not item:
            if copy is None:
                copy = list(value)
            copy[index] = new
    return value if copy is None else copy


def encode_fast(value: Any) -> bytes | None:
    """RFC 8785 bytes of a container or string ``value``, or ``None`` when the plain path
    must decide.

    Args:
        value: any Python value; only ``dict``, ``list``, ``tuple`` and exact ``str`` are
            tried here.

    Returns:
        Exactly the bytes of the plain path, or ``None`` for other scalars and for every value
        the fast path does not handle (invalid values included: the plain path raises for
        them).
    """
    t = type(value)
    if t is str:  # escaped as the plain path does; a lone surrogate fails to encode
        try:
            return encode_string(value).encode("utf-8")
        except UnicodeEncodeError:
            return None
    subs: list[str] = []
    try:
        if t is dict:
            prepared = _dict(value, 0, subs)
        elif t is list or t is tuple:
            prepared = _list(value, 0, subs)
        else:
            return None
    except (_Fallback, RecursionError):
        return None
    try:
        text = _ENCODE(prepared)
    except (_Fallback, RecursionError, ValueError, TypeError):  # pragma: no cover - defensive
        return None
    if subs:

        def number(match: re.Match[str]) -> str:
            index = int(match[1])
            return subs[index] if index < len(subs) else match[0]

        text, found = _PLACEHOLDER.subn(number, text)
        if found != len(subs):
            return None  # a string of the value imitated a placeholder: it holds surrogates
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None  # a lone surrogate: the plain path raises SurrogateError
