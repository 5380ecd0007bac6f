"""Canonical JSON (RFC 8785, JCS) bytes, a strict parser, and SHA-256 digests.

``dumps(value)`` gives the exact RFC 8785 bytes of a JSON value; ``digest(value)`` their
SHA-256 as 64-char lowercase hex, the id format used everywhere in merkle_memory; ``loads``
parses JSON text strictly, so that ``dumps(loads(dumps(x))) == dumps(x)`` for every accepted
``x`` (DESIGN section 2).

Domain (RFC 8785 §3.1, I-JSON): ``dict`` with ``str`` keys, ``list``, ``tuple``, ``str``,
``int`` within +-(2**53 - 1), finite ``float``, ``bool`` and ``None``, nested at most
``MAX_DEPTH`` deep. Anything else raises a
:class:`~merkle_memory.errors.CanonicalizationError` subclass; nothing is coerced.

Subclass policy: ``bool`` is its own JSON type (``true``/``false``), never an integer. A
subclass of ``str``, ``int`` or ``float`` (``StrEnum``, ``IntEnum``, ``IntFlag``, ``class
Role(str, Enum)``, a plain subclass) is its base value, as a value and, for ``str``, as a key:
the built-in data is read with the base class's own method, never through the subclass's
``__str__``, ``__repr__``, ``__int__``, ``__index__`` or ``__float__``, so ``Role.USER`` and
``"user"`` give the same bytes and digest. A bare ``Enum`` member raises
``UnsupportedTypeError`` (pass ``.value``). Subclasses of ``dict``, ``list`` and ``tuple``
(``OrderedDict``, ``defaultdict``, a named tuple) raise ``UnsupportedTypeError``: they can
override iteration, so their bytes would depend on code rather than on data; convert them
explicitly (``dict(x)``, ``list(x)``) before hashing.

Quick start::

    from merkle_memory import canonical
    canonical.dumps({"b": 1, "a": [1.0, 2e-7]})   # b'{"a":[1,2e-7],"b":1}'
    canonical.digest({"hello": "world"})          # 64-char lowercase hex
    canonical.loads(b'{"a":1}')                   # {'a': 1}
    with open("value.json", "wb") as fp:
        canonical.dump({"a": 1}, fp)              # writes b'{"a":1}'

Speed: ``dumps`` first tries a fast path (exact-type validation in Python, then the stdlib C
encoder; see ``merkle_memory.canonical._fast``) and falls back to the plain encoder,
``_dumps_reference``, for anything the fast path does not handle, so both give the same bytes
and raise the same errors. ``loads`` is the stdlib C scanner with the missing checks added.
"""

from __future__ import annotations

import hashlib
import io
from typing import IO, Any, TypeAlias

from ..errors import UnsupportedTypeError
from . import _decode
from ._encode import MAX_DEPTH, MAX_SAFE_INTEGER, dumps_reference, encode_string, format_number
from ._fast import encode_fast

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INTEGER",
    "JSONInput",
    "JSONScalar",
    "JSONValue",
    "digest",
    "dump",
    "dumps",
    "format_number",
    "loads",
]

JSONScalar: TypeAlias = bool | int | float | str | None
"""A JSON scalar: ``null``, a boolean, a number or a string."""

JSONValue: TypeAlias = JSONScalar | list["JSONValue"] | dict[str, "JSONValue"]
"""A JSON value as :func:`loads` returns it: arrays are lists, objects dicts with str keys."""

JSONInput: TypeAlias = (
    JSONScalar | list["JSONInput"] | tuple["JSONInput", ...] | dict[str, "JSONInput"]
)
"""The shapes :func:`dumps` accepts: :data:`JSONValue` plus tuples as arrays. What a type
cannot state is checked at run time: the integer range, finite floats, no lone surrogates,
the nesting depth, and which subclasses are accepted (see the module docstring)."""

_dumps_reference = dumps_reference
"""The plain path of :func:`dumps`, kept reachable for tests and benchmarks."""


def dumps(value: Any) -> bytes:
    """Serialize a JSON value to its RFC 8785 canonical bytes.

    Args:
        value: ``dict`` (exactly ``str`` keys), ``list``, ``tuple``, ``str``, ``int`` within
            +-(2**53 - 1), finite ``float``, ``bool`` or ``None``, nested at most
            ``MAX_DEPTH`` (512) deep. A subclass of ``str``, ``int`` or ``float``
            (``StrEnum``, ``IntEnum``) is its base value; other subclasses and a bare
            ``Enum`` are refused (see the module docstring).

    Returns:
        UTF-8 bytes with no whitespace and no trailing newline: object keys sorted by UTF-16
        code units (RFC 8785 §3.2.3), numbers in ES6 form with ``-0.0`` as ``0``
        (§3.2.2.3), strings escaped minimally (§3.2.2.2), no Unicode normalization.

    Raises:
        UnsupportedTypeError: a value of another type (``set``, ``bytes``, ``Decimal``, a
            bare ``Enum`` member, a subclass of ``dict``, ``list`` or ``tuple``), or an object
            key that is not a ``str`` (``int`` and ``IntEnum`` keys included).
        DuplicateKeyError: two keys of one object with the same string value (only possible
            with a ``str`` subclass key that redefines ``__eq__`` or ``__hash__``).
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


def dump(value: Any, fp: IO[bytes]) -> None:
    """Write the RFC 8785 canonical bytes of ``value`` to the binary file object ``fp``.

    Like ``json.dump`` beside ``json.dumps`` (and ``rfc8785.dump``): the bytes are exactly
    ``dumps(value)`` (no trailing newline), computed in full before anything is written, so a
    value outside the domain writes nothing. They are handed to ``fp.write`` in one call (a raw,
    unbuffered file that takes fewer bytes is called again with the rest). Nothing is flushed
    or closed: ``fp`` stays the caller's.

    Args:
        value: as for :func:`dumps`.
        fp: a file object open for writing bytes (``open(path, "wb")``, ``io.BytesIO``,
            ``sys.stdout.buffer``), or anything with a ``write(bytes)`` method.

    Raises:
        UnsupportedTypeError: ``fp`` has no callable ``write`` (``None``, a path), checked
            before ``value`` is encoded, or ``fp`` is a text file (an ``io.TextIOBase``,
            e.g. ``open(path, "w")`` or ``sys.stdout``): canonical JSON is bytes, so open the
            file in binary mode (or write ``dumps(value).decode("utf-8")`` yourself). Nothing
            is written.
        BlockingIOError: a non-blocking raw ``fp`` could not take the bytes.
        OSError: what ``fp.write`` raises.
        The same errors as :func:`dumps` for ``value`` (nothing is written then).
    """
    if not callable(getattr(fp, "write", None)):
        raise UnsupportedTypeError(
            f"canonical.dump writes to a binary file object (with a write method), not "
            f"{type(fp).__name__}",
            fp,
        )
    if isinstance(fp, io.TextIOBase):
        raise UnsupportedTypeError(
            f"canonical.dump writes bytes; {type(fp).__name__} is a text file: open it in "
            "binary mode ('wb')",
            fp,
        )
    data = dumps(value)
    view = memoryview(data)
    while view:
        written = fp.write(view)
        if written is None:  # a non-blocking raw file that would block
            raise BlockingIOError(0, "the file took no bytes", len(data) - len(view))
        if not isinstance(written, int) or written >= len(view):
            return
        view = view[written:]


def digest(value: Any) -> str:
    """SHA-256 of ``dumps(value)``: the id of a JSON value (DESIGN section 2).

    Returns:
        64-char lowercase hex.

    Raises:
        The same errors as :func:`dumps`.
    """
    out = encode_fast(value)
    return hashlib.sha256(dumps_reference(value) if out is None else out).hexdigest()


def loads(data: bytes | bytearray | str) -> JSONValue:
    """Parse JSON text strictly into a value inside the canonical domain (DESIGN section 2).

    Args:
        data: UTF-8 bytes (no byte-order mark) or a ``str``; JSON whitespace around the value
            is allowed.

    Returns:
        A :data:`JSONValue`: ``dict``/``list``/``str``/``int``/``float``/``bool``/``None``
        (arrays are lists; narrow it with ``isinstance`` before indexing). A
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
    value: JSONValue = _decode.loads(data)
    return value
