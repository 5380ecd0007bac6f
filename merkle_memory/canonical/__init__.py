"""Canonical JSON (RFC 8785, JCS) bytes, a strict parser, and SHA-256 digests.

``dumps(value)`` gives the exact RFC 8785 bytes of a JSON value; ``digest(value)`` their
SHA-256 as 64-char lowercase hex, the id format used everywhere in merkle_memory; ``loads``
parses JSON text strictly, so that ``dumps(loads(dumps(x))) == dumps(x)`` for every accepted
``x`` (DESIGN section 2).

Domain (RFC 8785 §3.1, I-JSON): ``dict`` with ``str`` keys, ``list``, ``tuple``, ``str``,
``int`` within +-(2**53 - 1), finite ``float``, ``bool`` and ``None``, nested at most
``MAX_DEPTH`` deep. Anything else raises a
:class:`~merkle_memory.errors.CanonicalizationError` subclass; nothing is coerced.

Subclass policy: types are checked exactly. ``bool`` is its own JSON type (``true``/``false``),
never an integer; every other subclass of a JSON type (``IntEnum``, ``StrEnum``, a ``str`` or
``float`` subclass, ``OrderedDict``, ``defaultdict``, a ``list`` subclass, a named tuple) raises
``UnsupportedTypeError``, as a value and as a key. A subclass can override ``__repr__``,
``__iter__`` or ``items``, so its bytes would depend on code rather than on data; convert it
explicitly (``int(x)``, ``dict(x)``, ``x.value``) before hashing.

Speed: ``dumps`` first tries a fast path (exact-type validation in Python, then the stdlib C
encoder; see ``merkle_memory.canonical._fast``) and falls back to the plain encoder,
``_dumps_reference``, for anything the fast path does not handle, so both give the same bytes
and raise the same errors. ``loads`` is the stdlib C scanner with the missing checks added.
"""

from __future__ import annotations

import hashlib
from typing import Any

from . import _decode
from ._encode import MAX_DEPTH, MAX_SAFE_INTEGER, dumps_reference, encode_string, format_number
from ._fast import encode_fast

__all__ = ["MAX_DEPTH", "MAX_SAFE_INTEGER", "digest", "dumps", "format_number", "loads"]

_dumps_reference = dumps_reference
"""The plain path of :func:`dumps`, kept reachable for tests and benchmarks."""


def dumps(value: Any) -> bytes:
    """Serialize a JSON value to its RFC 8785 canonical bytes.

    Args:
        value: ``dict`` (exactly ``str`` keys), ``list``, ``tuple``, ``str``, ``int`` within
            +-(2**53 - 1), finite ``float``, ``bool`` or ``None``, nested at most
            ``MAX_DEPTH`` (512) deep. Subclasses are refused (see the module docstring).

    Returns:
        UTF-8 bytes with no whitespace and no trailing newline: object keys sorted by UTF-16
        code units (RFC 8785 §3.2.3), numbers in ES6 form with ``-0.0`` as ``0``
        (§3.2.2.3), strings escaped minimally (§3.2.2.2), no Unicode normalization.

    Raises:
        UnsupportedTypeError: a value of another type (``set``, ``bytes``, ``Decimal``, a
            subclass), or an object key that is not exactly ``str``.
        IntegerDomainError: an ``int`` outside +-(2**53 - 1) (store big ids as strings).
        FloatDomainError: NaN or +-Infinity.
        SurrogateError: a lone surrogate in a string or an object key.
        NestingDepthError: arrays/objects nested deeper than ``MAX_DEPTH`` (a cyclic value
            included), or deeper than the interpreter's stack allows at the call site.
    """
    if type(value) is str:  # the C escaper's text (encode_fast's string branch, inlined)
        try:
            return encode_string(value).encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate: the plain path raises
            return dumps_reference(value)
    out = encode_fast(value)
    return dumps_reference(value) if out is None else out


def digest(value: Any) -> str:
    """SHA-256 of ``dumps(value)``: the id of a JSON value (DESIGN section 2).

    Returns:
        64-char lowercase hex.

    Raises:
        The same errors as :func:`dumps`.
    """
    out = encode_fast(value)
    return hashlib.sha256(dumps_reference(value) if out is None else out).hexdigest()


def loads(data: bytes | bytearray | str) -> Any:
    """Parse JSON text strictly into a value inside the canonical domain (DESIGN section 2).

    Args:
        data: UTF-8 bytes (no byte-order mark) or a ``str``; JSON whitespace around the value
            is allowed.

    Returns:
        ``dict``/``list``/``str``/``int``/``float``/``bool``/``None`` (arrays are lists). A
        number literal with a fraction or exponent is a ``float``; an integer literal within
        +-(2**53 - 1) is an ``int``; a larger one is a ``float`` only if it is exactly the ES6
        form of a double (``9007199254740992``, ``1152921504606847000``).

    Raises:
        EncodingError: invalid UTF-8 (UTF-8-encoded surrogates included), or a leading
            byte-order mark (RFC 8785 §3.2.4).
        JSONSyntaxError: not JSON, trailing data, or an empty document.
        DuplicateKeyError: an object names a key twice (RFC 8785 §3.1).
        FloatDomainError: ``NaN``/``Infinity`` literals, or a number that overflows to
            infinity (``1E400``, an integer literal of 310+ digits).
        IntegerDomainError: an integer literal beyond +-(2**53 - 1) that is not the exact
            ES6 form of a double (``9007199254740993``, ``1152921504606846976``).
        SurrogateError: a lone-surrogate escape such as ``"\\ud800"`` (or a lone surrogate
            in a ``str`` argument), in a string or a key.
        NestingDepthError: arrays/objects nested deeper than ``MAX_DEPTH``.
        UnsupportedTypeError: ``data`` is neither bytes nor str.
    """
    return _decode.loads(data)
