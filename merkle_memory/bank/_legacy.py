"""Reading legacy memory files for a migration (private; ``MemoryBank.migrate``, DESIGN 5).

A legacy file is a JSON (or, when PyYAML is importable, YAML) object with a random ``id``
(e.g. a UUID), an optional ``status``, the core fields ``type, scope, content, timestamp``
(required) and ``tags, source_session, links`` (optional), and no other key.

Where its replacement goes follows the legacy status, since a memory's status is the folder
its file is in (DESIGN section 5), never a field:

- a file in ``memories/archive/`` stays archived, whatever its status;
- a file in ``memories/`` whose status is one of :data:`ARCHIVED_STATUSES` (``archived``,
  ``subsumed``, ``superseded``, ``falsified``: the states of the anchor project, Tur, that
  take a memory out of use) goes to ``memories/archive/``;
- a file in ``memories/`` with no status, ``null``, or one of :data:`ACTIVE_STATUSES`
  (``active``, ``pending_approval``) stays active;
- any other status of a file in ``memories/`` cannot be placed without guessing: the file is
  skipped and left untouched.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from .. import canonical
from ..errors import CanonicalizationError
from ._files import read_regular
from .memory import Memory

__all__ = [
    "ACTIVE_STATUSES",
    "ARCHIVED_STATUSES",
    "YAML_SUFFIXES",
    "Legacy",
    "NotLegacy",
    "convert_link",
    "goes_to_archive",
    "legacy_id_of",
    "parse_timestamp",
    "read_legacy",
    "yaml_module",
]

ACTIVE_STATUSES: Final = frozenset(("active", "pending_approval"))
"""Legacy statuses whose memory stays active (in ``memories/``)."""

ARCHIVED_STATUSES: Final = frozenset(("archived", "subsumed", "superseded", "falsified"))
"""Legacy statuses whose memory is migrated into ``memories/archive/``."""

YAML_SUFFIXES: Final = (".yaml", ".yml")

_LEGACY_KEYS: Final = frozenset(
    ("id", "status", "type", "scope", "content", "tags", "timestamp", "source_session", "links")
)
_REQUIRED: Final = ("id", "type", "scope", "content", "timestamp")


@dataclass(slots=True)
class Legacy:
    """One legacy file read for migration (mutable working state of a run).

    Attributes:
        path: the legacy file.
        rel: its path relative to the bank, ``/``-separated.
        legacy_id: its ``id`` (a non-empty string, e.g. a UUID).
        fields: the core fields but ``links`` (timestamp already a UTC-aware datetime).
        links: the links after step 1 (objects turned into ``<uri>#<relation>`` strings).
        naive: the legacy timestamp had no UTC offset and is read as UTC.
        status: the legacy ``status`` as found (any JSON value, ``None`` when absent).
        archived: the replacement goes to ``memories/archive/`` (see the module docstring).
        memory: the replacement, once written (or found).
        final: where the replacement is, once written (or found).
        twin: the replacement was already in the bank, byte-identical.
        kept: ``mm://memory/...`` links kept as they were (unresolved).
    """

    path: Path
    rel: str
    legacy_id: str
    fields: dict[str, Any]
    links: list[str]
    naive: bool
    status: Any
    archived: bool
    memory: Memory | None = None
    final: Path | None = None
    twin: bool = False
    kept: list[str] = field(default_factory=list)


class NotLegacy(Exception):
    """A file that is not a legacy memory, or cannot be migrated as is (reason in the message)."""


def legacy_id_of(obj: object) -> str | None:
    """The legacy id of a parsed file that is a legacy memory, else ``None``.

    A legacy memory (what ``bank verify`` reports as ``legacy`` and ``bank migrate``
    rewrites): a JSON object without ``schema``, with a non-empty string ``id`` and the
    required fields ``type, scope, content, timestamp``. Whether it can be migrated as is
    (its status, its links, unknown fields) is for the migration to say.
    """
    if not isinstance(obj, Mapping) or "schema" in obj:
        return None
    legacy_id = obj.get("id")
    if not isinstance(legacy_id, str) or not legacy_id:
        return None
    return legacy_id if all(key in obj for key in _REQUIRED) else None


def yaml_module() -> Any:
    """The ``yaml`` module (PyYAML) when importable, else ``None``."""
    try:
        return importlib.import_module("yaml")
    except ImportError:
        return None


def parse_timestamp(value: object) -> tuple[datetime, bool]:
    """A legacy timestamp (ISO 8601 text or a datetime PyYAML made) as a timezone-aware
    datetime, and whether it was naive (then read as UTC).

    Raises:
        NotLegacy: not ISO 8601, or neither a string nor a datetime.
    """
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as exc:
            raise NotLegacy(f"timestamp is not ISO 8601: {value[:60]!r}") from exc
    else:
        raise NotLegacy(f"timestamp must be a string, not {type(value).__name__}")
    if parsed.utcoffset() is None:
        return parsed.replace(tzinfo=UTC), True
    return parsed, False


def convert_link(link: object) -> str:
    """Step 1: a link object becomes ``<uri>#<relation>`` (or ``<uri>``); a string stays.

    Raises:
        NotLegacy: neither a string nor a ``{uri, relation}`` object with string values.
    """
    if isinstance(link, str):
        return link
    if isinstance(link, Mapping):
        if set(link) - {"uri", "relation"} or not isinstance(link.get("uri"), str):
            raise NotLegacy(f"link object must be {{uri, relation}}: {str(link)[:80]}")
        relation = link.get("relation")
        if relation is None:
            return str(link["uri"])
        if not isinstance(relation, str):
            raise NotLegacy(f"link relation must be a string or null: {relation!r:.40}")
        return f"{link['uri']}#{relation}"
    raise NotLegacy(f"a link is a string or a {{uri, relation}} object, not {type(link).__name__}")


def goes_to_archive(status: object, in_archive: bool) -> bool:
    """True when the replacement goes to ``memories/archive/`` (rules: module docstring).

    Args:
        status: the legacy ``status`` (any value; ``None`` when absent).
        in_archive: the file is in a folder that archives whatever the status says.

    Raises:
        NotLegacy: a file outside such a folder has an unknown status.
    """
    if in_archive:
        return True
    if status is None or (isinstance(status, str) and status in ACTIVE_STATUSES):
        return False
    if isinstance(status, str) and status in ARCHIVED_STATUSES:
        return True
    known = ", ".join(sorted(ACTIVE_STATUSES | ARCHIVED_STATUSES))
    raise NotLegacy(
        f"unknown legacy status {str(status)[:40]!r} (known: {known}); cannot tell whether it "
        "is active or archived"
    )


def _legacy_from_object(obj: object, path: Path, rel: str, in_archive: bool) -> Legacy:
    if not isinstance(obj, Mapping):
        raise NotLegacy(f"not a legacy memory (a {type(obj).__name__}, not an object)")
    if "schema" in obj:
        raise NotLegacy("not a legacy memory (it has a schema field; see `bank verify`)")
    if unknown := set(map(str, obj)) - _LEGACY_KEYS:
        shown = ", ".join(sorted(unknown)[:5])
        raise NotLegacy(f"unknown fields ({shown}); migrating would lose them")
    if missing := [k for k in _REQUIRED if k not in obj]:
        raise NotLegacy(f"not a legacy memory (missing {', '.join(missing)})")
    legacy_id = obj["id"]
    if not isinstance(legacy_id, str) or not legacy_id:
        raise NotLegacy("legacy id must be a non-empty string")
    status = obj.get("status")
    archived = goes_to_archive(status, in_archive)
    timestamp, naive = parse_timestamp(obj["timestamp"])
    links = obj.get("links") or []
    if not isinstance(links, list):
        raise NotLegacy("links must be a list")
    tags = obj.get("tags") or []
    if not isinstance(tags, list):
        raise NotLegacy("tags must be a list")
    fields = {
        "type": obj["type"],
        "scope": obj["scope"],
        "content": obj["content"],
        "tags": tags,
        "timestamp": timestamp,
        "source_session": obj.get("source_session"),
    }
    converted = [convert_link(link) for link in links]
    return Legacy(path, rel, legacy_id, fields, converted, naive, status, archived)


def read_legacy(path: Path, rel: str, yaml: Any, *, in_archive: bool) -> Legacy:
    """Parse one candidate file.

    Args:
        path: the file (a regular file; never followed through a symlink).
        rel: its path relative to the bank.
        yaml: the PyYAML module, or ``None`` (only used for ``.yaml``/``.yml`` names).
        in_archive: the file is in ``memories/archive/``.

    Raises:
        NotLegacy: not a legacy memory, or one that cannot be migrated (skip, untouched).
        ValueError: the file does not parse (unparseable, untouched).
        BankError, OSError: the file cannot be read.
    """
    data = read_regular(path)
    if path.name.endswith(YAML_SUFFIXES):
        try:
            obj = yaml.safe_load(data)
        except Exception as exc:  # PyYAML raises YAMLError, but also others on odd input
            first = (str(exc).splitlines() or [type(exc).__name__])[0]
            raise ValueError(f"not YAML: {first[:120]}") from exc
    else:
        try:
            obj = canonical.loads(data)
        except CanonicalizationError as exc:
            raise ValueError(str(exc)) from exc
    return _legacy_from_object(obj, path, rel, in_archive)
