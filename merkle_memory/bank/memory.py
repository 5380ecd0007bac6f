"""One memory of the memory bank and its content-addressed id (DESIGN section 5, EP-0106).

A :class:`Memory` is a frozen value of seven core fields. Its id is the SHA-256 of the RFC 8785
bytes of an object holding ``"schema": "memory/1"`` and all seven fields, always present::

    {"content": ..., "links": [...], "schema": "memory/1", "scope": ..., "source_session": ...,
     "tags": [...], "timestamp": "YYYY-MM-DDTHH:MM:SS.ffffffZ", "type": ...}

A *salted* memory (a salted bank, issue 20) also holds ``salt``, 32 random bytes as 64
lowercase hex, kept only in its file; its id is ``SHA-256(salt bytes || RFC 8785 bytes of the
same object)``, so once the file is gone the id (the bank's ledger holds it) cannot be linked
to any guessed content. An unsalted memory's id is unchanged.

This fixes the bug classes of the anchor's ``|``-joined preimage: no ambiguous joins (tags
``["a","b"]`` and ``["a,b"]`` differ, ``|`` in content is just a character), content is hashed
byte-exact (never stripped), ``None`` and ``""`` differ, timestamps are timezone-aware and
written in UTC with microseconds, and the ``schema`` field versions the preimage.

Validation rules (each failure raises :class:`~merkle_memory.errors.MemoryFormatError`):

- ``type``: a slug ``[a-z0-9_-]+`` of at most 64 characters (it is part of the file name).
- ``scope``, ``content``: any ``str`` without lone surrogates (content is kept byte-exact).
- ``tags``: an iterable of ``str`` (not a bare ``str``); stored sorted, without duplicates.
- ``timestamp``: a timezone-aware ``datetime``; stored converted to UTC.
- ``source_session``: a ``str`` or ``None`` (``""`` is a value distinct from ``None``).
- ``links``: an iterable of URI strings, stored sorted without duplicates. A link is checked
  only loosely: it must start with an RFC 3986 scheme (``[A-Za-z][A-Za-z0-9+.-]*:``), be at most
  2048 characters, and hold no whitespace or control characters. Its target is not resolved.
- ``salt``: ``None`` (unsalted) or 64 lowercase hex.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from .. import canonical
from .._json import HEX64
from ..errors import CanonicalizationError, MemoryFormatError

__all__ = [
    "CORE_FIELDS",
    "FILE_KEYS",
    "MAX_MEMORY_FILE_BYTES",
    "MEMORY_URI_PREFIX",
    "SALT_KEY",
    "SCHEMA",
    "Memory",
    "format_timestamp",
    "is_memory_id",
    "memory_uri",
    "parse_timestamp",
]

SCHEMA: Final = "memory/1"
"""Value of the ``schema`` field: the version of the hashed preimage (DESIGN section 5)."""

CORE_FIELDS: Final = ("type", "scope", "content", "tags", "timestamp", "source_session", "links")
"""The seven core fields of a memory, in constructor order."""

FILE_KEYS: Final = frozenset(("id", "schema", *CORE_FIELDS))
"""The exact key set of a memory file (DESIGN section 5); a salted memory's file also holds
``salt``."""

SALT_KEY: Final = "salt"
"""The key of a salted memory's salt in its file (64 lowercase hex)."""

MEMORY_URI_PREFIX: Final = "mm://memory/"
"""Prefix of a link naming another memory: ``mm://memory/<64-char hex id>``."""

MAX_TYPE_LENGTH: Final = 64
MAX_LINK_LENGTH: Final = 2048

MAX_MEMORY_FILE_BYTES: Final = 16 * 1024 * 1024
"""Largest memory file a bank reads or writes, in bytes (16 MiB), counting the whole file
(:meth:`Memory.to_bytes`: RFC 8785 JSON and its newline). ``MemoryBank.save`` refuses a larger
memory with ``MemoryFormatError`` before writing anything; a larger file found in a bank is
reported unparseable, never loaded."""

_SLUG: Final = re.compile(r"[a-z0-9_-]+")
_URI: Final = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:[^\x00-\x20\x7f-\x9f\s]*")
_TIMESTAMP: Final = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.(\d{6})Z")


def is_memory_id(value: object) -> bool:
    """True when ``value`` is a memory id: a 64-char lowercase hex ``str``."""
    return isinstance(value, str) and HEX64.fullmatch(value) is not None


def memory_uri(memory_id: str) -> str:
    """The link naming a memory: ``mm://memory/<id>``.

    Args:
        memory_id: 64-char lowercase hex.

    Raises:
        MemoryFormatError: ``memory_id`` is not 64-char lowercase hex.
    """
    if not is_memory_id(memory_id):
        raise MemoryFormatError(f"not a memory id (64 lowercase hex): {memory_id!r:.80}")
    return MEMORY_URI_PREFIX + memory_id


def format_timestamp(value: datetime) -> str:
    """Write a timezone-aware datetime in UTC as ``YYYY-MM-DDTHH:MM:SS.ffffffZ``.

    Raises:
        MemoryFormatError: ``value`` is not a ``datetime``, is naive, or falls outside years
            1..9999 once converted to UTC.
    """
    utc = _to_utc(value)
    return (
        f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}T"
        f"{utc.hour:02d}:{utc.minute:02d}:{utc.second:02d}.{utc.microsecond:06d}Z"
    )


def parse_timestamp(text: str) -> datetime:
    """Read an ISO 8601 timestamp that carries a UTC offset (``Z`` or ``+HH:MM``).

    Args:
        text: e.g. ``2026-05-29T12:00:00Z`` or ``2026-05-29T14:00:00.5+02:00``.

    Returns:
        The instant as a ``datetime`` in UTC.

    Raises:
        MemoryFormatError: not ISO 8601, or naive (no offset: the instant would be a guess).
    """
    if not isinstance(text, str):
        raise MemoryFormatError(f"timestamp must be a string, not {type(text).__name__}")
    try:
        value = datetime.fromisoformat(text)
    except ValueError as exc:
        raise MemoryFormatError(f"not an ISO 8601 timestamp: {text!r:.80}") from exc
    if value.utcoffset() is None:
        raise MemoryFormatError(f"timestamp has no UTC offset (naive): {text!r:.80}")
    return _to_utc(value)


def _to_utc(value: object) -> datetime:
    if not isinstance(value, datetime):
        raise MemoryFormatError(
            f"timestamp must be a timezone-aware datetime, not {type(value).__name__}"
        )
    if value.utcoffset() is None:
        raise MemoryFormatError(f"naive timestamp (no timezone): {value.isoformat()}")
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError) as exc:
        raise MemoryFormatError(f"timestamp out of range in UTC: {value.isoformat()}") from exc
    return datetime(
        utc.year, utc.month, utc.day, utc.hour, utc.minute, utc.second, utc.microsecond, UTC
    )


def _parse_file_timestamp(text: object) -> datetime:
    if not isinstance(text, str) or (match := _TIMESTAMP.fullmatch(text)) is None:
        raise MemoryFormatError(
            f"timestamp is not in the form YYYY-MM-DDTHH:MM:SS.ffffffZ: {text!r:.80}"
        )
    try:
        year, month, day, hour, minute, second, micro = (int(part) for part in match.groups())
        return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)
    except ValueError as exc:
        raise MemoryFormatError(f"invalid timestamp {text!r}: {exc}") from exc


def _string(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise MemoryFormatError(f"{name} must be a string, not {type(value).__name__}")
    return value


def _string_set(name: str, values: object) -> tuple[str, ...]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise MemoryFormatError(f"{name} must be a list of strings, not {type(values).__name__}")
    items = list(values)
    for item in items:
        _string(f"each of {name}", item)
    return tuple(sorted(set(items)))


def _check_link(link: str) -> None:
    if len(link) > MAX_LINK_LENGTH or _URI.fullmatch(link) is None:
        raise MemoryFormatError(
            f"link is not a URI (scheme ':' then no whitespace or control characters, at most "
            f"{MAX_LINK_LENGTH} characters): {link!r:.80}"
        )


@dataclass(frozen=True, slots=True)
class Memory:
    """One memory: seven core fields and the content-addressed ``id`` (DESIGN section 5).

    The constructor validates and normalizes (see the module docstring): tags and links become
    sorted tuples without duplicates, the timestamp becomes UTC. Two memories are equal exactly
    when their ids are equal. The constructor does not limit the size, but a bank stores only
    memories whose file (:meth:`to_bytes`) is at most :data:`MAX_MEMORY_FILE_BYTES` (16 MiB).

    Attributes:
        type: slug ``[a-z0-9_-]+``, at most 64 characters (e.g. ``"fact"``).
        scope: free text (e.g. ``"project"``).
        content: the memory text, byte-exact.
        tags: any sequence of ``str`` in; stored as a sorted ``tuple`` without duplicates.
        timestamp: timezone-aware, UTC; defaults to now.
        source_session: the session that produced the memory, or ``None``.
        links: URI strings in; stored as a sorted ``tuple`` without duplicates
            (``mm://memory/<id>`` names another memory).
        salt: ``None`` for an ordinary memory; for a salted one, 64 lowercase hex (32 random
            bytes, :meth:`salted`), kept in its file and prefixed to the hashed bytes.
        id: 64-char lowercase hex: SHA-256 of the RFC 8785 bytes of :meth:`hashed_dict`, with
            the 32 salt bytes before them for a salted memory.

    Raises:
        MemoryFormatError: any invalid field (non-slug type, naive timestamp, non-string tag,
            a link that is not a URI, a lone surrogate in any string, a salt that is not 64
            lowercase hex, ...).
    """

    type: str
    scope: str
    content: str
    tags: Sequence[str] = ()
    timestamp: datetime = field(default_factory=lambda: datetime.now(UTC))
    source_session: str | None = None
    links: Sequence[str] = ()
    salt: str | None = field(default=None, repr=False)
    id: str = field(init=False, repr=False, compare=True)

    def __post_init__(self) -> None:
        kind = _string("type", self.type)
        if len(kind) > MAX_TYPE_LENGTH or _SLUG.fullmatch(kind) is None:
            raise MemoryFormatError(
                f"type must be a slug [a-z0-9_-]+ of at most {MAX_TYPE_LENGTH} characters: "
                f"{kind!r:.80}"
            )
        _string("scope", self.scope)
        _string("content", self.content)
        if self.source_session is not None:
            _string("source_session", self.source_session)
        links = _string_set("links", self.links)
        for link in links:
            _check_link(link)
        object.__setattr__(self, "tags", _string_set("tags", self.tags))
        object.__setattr__(self, "links", links)
        object.__setattr__(self, "timestamp", _to_utc(self.timestamp))
        if self.salt is not None and not is_memory_id(self.salt):
            raise MemoryFormatError(f"salt must be 64 lowercase hex, not {self.salt!r:.80}")
        try:
            data = canonical.dumps(self.hashed_dict())
        except CanonicalizationError as exc:
            raise MemoryFormatError(f"memory has no canonical form: {exc}") from exc
        prefix = b"" if self.salt is None else bytes.fromhex(self.salt)
        object.__setattr__(self, "id", hashlib.sha256(prefix + data).hexdigest())

    def salted(self, salt: str | None = None) -> Memory:
        """This memory with a salt (a fresh one from ``secrets`` unless given): same fields,
        another id.

        Raises:
            MemoryFormatError: ``salt`` is not 64 lowercase hex.
        """
        return dataclasses.replace(self, salt=secrets.token_hex(32) if salt is None else salt)

    def same_content(self, other: Memory) -> bool:
        """Whether ``other`` holds the same seven core fields (its salt may differ)."""
        return self.hashed_dict() == other.hashed_dict()

    def hashed_dict(self) -> dict[str, Any]:
        """The object whose RFC 8785 SHA-256 is the id: ``schema`` plus the seven core fields."""
        return {
            "schema": SCHEMA,
            "type": self.type,
            "scope": self.scope,
            "content": self.content,
            "tags": list(self.tags),
            "timestamp": format_timestamp(self.timestamp),
            "source_session": self.source_session,
            "links": list(self.links),
        }

    def to_dict(self) -> dict[str, Any]:
        """The content of the memory's file: ``id``, ``schema`` and the seven core fields
        (and ``salt`` for a salted memory)."""
        out = {"id": self.id, **self.hashed_dict()}
        if self.salt is not None:
            out[SALT_KEY] = self.salt
        return out

    def to_bytes(self) -> bytes:
        """The exact bytes of the memory's file: RFC 8785 of :meth:`to_dict` and a newline."""
        return canonical.dumps(self.to_dict()) + b"\n"

    @property
    def file_name(self) -> str:
        """The file name ``<YYYYmmdd_HHMMSS>_<type>_<id>.json`` (UTC, whole seconds)."""
        ts = self.timestamp
        return (
            f"{ts.year:04d}{ts.month:02d}{ts.day:02d}_{ts.hour:02d}{ts.minute:02d}"
            f"{ts.second:02d}_{self.type}_{self.id}.json"
        )

    @property
    def uri(self) -> str:
        """The link naming this memory: ``mm://memory/<id>``."""
        return MEMORY_URI_PREFIX + self.id

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, check_id: bool = True) -> Memory:
        """Read a memory file's object, strictly.

        The object must be exactly what :meth:`to_dict` writes: the keys ``schema`` and the
        seven core fields (``id`` too unless ``check_id`` is false, when it is optional;
        ``salt`` for a salted memory), the
        schema ``"memory/1"``, tags and links already sorted and unique, the timestamp in the
        form ``YYYY-MM-DDTHH:MM:SS.ffffffZ``. So any edit of a value changes the id or is
        refused, and nothing is silently dropped or normalized.

        Args:
            data: the parsed JSON object.
            check_id: compare the stored ``id`` with the recomputed one.

        Raises:
            MemoryFormatError: not an object, missing or unknown keys (named), another schema,
                an invalid field, a field not in its canonical form, or (with ``check_id``) an
                ``id`` that does not match the content.
        """
        if not isinstance(data, Mapping):
            raise MemoryFormatError(f"a memory is a JSON object, not {type(data).__name__}")
        keys = set(data)
        required = FILE_KEYS if check_id else FILE_KEYS - {"id"}
        if missing := required - keys:
            raise MemoryFormatError(f"missing keys: {', '.join(sorted(missing))}")
        if unknown := keys - FILE_KEYS - {SALT_KEY}:
            shown = ", ".join(repr(k)[:40] for k in sorted(map(str, unknown))[:5])
            raise MemoryFormatError(f"unknown keys: {shown}")
        if data["schema"] != SCHEMA:
            raise MemoryFormatError(f"unsupported schema {data['schema']!r:.80}, not {SCHEMA!r}")
        if SALT_KEY in data and data[SALT_KEY] is None:
            raise MemoryFormatError("salt must be 64 lowercase hex, not null")
        for name in ("tags", "links"):
            if not isinstance(data[name], list):
                raise MemoryFormatError(f"{name} must be a list of strings")
        memory = cls(
            type=data["type"],
            scope=data["scope"],
            content=data["content"],
            tags=data["tags"],
            timestamp=_parse_file_timestamp(data["timestamp"]),
            source_session=data["source_session"],
            links=data["links"],
            salt=data.get(SALT_KEY),
        )
        if list(memory.tags) != data["tags"] or list(memory.links) != data["links"]:
            raise MemoryFormatError("tags and links must be sorted and without duplicates")
        if check_id and data["id"] != memory.id:
            raise MemoryFormatError(
                f"stored id {str(data['id'])[:80]!r} does not match the content (id {memory.id})"
            )
        return memory
