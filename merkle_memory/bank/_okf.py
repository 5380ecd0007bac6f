"""Reading Tur's OKF markdown memories for a migration (private; ``MemoryBank.migrate``).

Tur (erivlis/tur, the EP-0106 anchor) writes each memory as an OKF markdown file
``memories/<folder>/<YYYYmmdd_HHMMSS>_<type>_<hash>.md``, where ``<folder>`` is its status:
``active/``, ``archive/`` (forgotten) or ``subsumed/`` (compacted into Tur's L2 graph, still
recoverable). A file is exactly::

    ---\\n<YAML front matter>---\\n\\n<content>\\n

The front matter (PyYAML, so the ``yaml`` extra) holds ``type: L1 Memory``, ``title``,
``description``, ``tags``, ``timestamp`` (ISO 8601, usually naive), ``scope`` and
``memory_type`` (Tur's enum values in upper case: ``INCARNATION``, ``FACT``), ``hash`` (Tur's
id, 64-char lowercase hex) and, only when set, ``links`` (``{uri, relation}`` objects),
``source_session``, Tur's core-memory fields and ``status``.

What a migration takes from it (docs/FORMAT.md section 5.3):

- content: the bytes between the blank line after the front matter and the final newline,
  byte-exact (Tur itself strips them when it reads a file back, so its own verify flags a
  memory whose content starts or ends with whitespace; this reader does not);
- ``type`` and ``scope``: ``memory_type`` and ``scope`` in lower case (Tur's enum values);
- ``tags``, ``timestamp`` (naive read as UTC, as for the JSON and YAML eras),
  ``source_session``, ``links`` (objects become ``"<uri>#<relation>"``);
- the legacy id is Tur's ``hash``, checked first: it must end the file name and equal Tur's
  own hash of the front matter and content (:func:`tur_payloads`: the payloads of the three
  eras of Tur's formula), so a file altered after Tur wrote it is never laundered into a new
  content-addressed memory (it is skipped, left untouched);
- ``title`` and ``description`` are dropped: Tur derives them from the hash, the type and the
  first line of the content, and does not hash them;
- any other front matter key (Tur's core-memory fields ``core_type``, ``derived_principle``,
  ``ethical_covenant``; later fields such as ``confidence``, ``provenance``, ``redacted``)
  has no place in a ``memory/1`` file: the file is skipped, left untouched.

Where the replacement goes follows the folder (a status is where the file is): ``archive/``
and ``subsumed/`` go to ``memories/archive/`` whatever the front matter's ``status`` says (Tur
never rewrites a file it moves, so the field keeps saying ``active``); a file in ``active/``
is placed by its ``status`` as a legacy file in ``memories/`` is (``active`` or
``pending_approval`` stay active, ``superseded`` or ``falsified`` are archived, any other
status is skipped). The report's legacy ``status`` is ``archived`` or ``subsumed`` for those
folders, so a subsumed memory stays told apart from an archived one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from .._json import HEX64
from ._files import read_regular
from ._legacy import Legacy, NotLegacy, convert_link, goes_to_archive, parse_timestamp

__all__ = [
    "OKF_SUFFIX",
    "TUR_FOLDERS",
    "read_okf",
    "split_okf",
    "tur_payloads",
]

OKF_SUFFIX: Final = ".md"

TUR_FOLDERS: Final = {"active": None, "archive": "archived", "subsumed": "subsumed"}
"""Tur's status folders inside ``memories/`` -> the status they give (``None``: the front
matter's ``status`` decides, as for a legacy file in ``memories/``)."""

OKF_MEMORY_TYPE: Final = "L1 Memory"
"""The front matter ``type`` of a Tur memory (other OKF files, e.g. concepts, are not)."""

_OKF_KEYS: Final = frozenset(
    (
        "type",
        "title",
        "description",
        "tags",
        "timestamp",
        "scope",
        "memory_type",
        "hash",
        "links",
        "source_session",
        "status",
    )
)
_REQUIRED: Final = ("memory_type", "scope", "timestamp", "hash")


def split_okf(data: bytes) -> tuple[str, str]:
    """The front matter text and the content of an OKF file as Tur writes it.

    Args:
        data: the whole file, ``---\\n<front matter>---\\n\\n<content>\\n`` in UTF-8.

    Returns:
        ``(front matter, content)``; the front matter ends with its last newline, the content
        is byte-exact (the blank line before it and the final newline are Tur's framing).

    Raises:
        ValueError: not UTF-8, no front matter, or not framed as Tur frames the content.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (byte offset {exc.start})") from exc
    if not text.startswith("---\n"):
        raise ValueError("not OKF: the file does not start with a '---' line")
    end = text.find("\n---\n", 3)
    if end < 0:
        raise ValueError("not OKF: the front matter has no closing '---' line")
    body = text[end + 5 :]
    if not body.startswith("\n") or not body.endswith("\n"):
        raise ValueError(
            "not OKF as Tur writes it: expected a blank line after the front matter and a "
            "newline at the end"
        )
    return text[4 : end + 1], body[1:-1]


def tur_payloads(
    *,
    timestamp: str,
    memory_type: str,
    scope: str,
    tags: list[str],
    content: str,
    links: list[tuple[str, str | None]],
    source_session: str | None,
    status: str | None,
) -> list[str]:
    """The strings Tur hashes (SHA-256 of UTF-8) for these fields, one per era of its formula.

    Tur's id is ``sha256("|".join(fields))`` with no escaping (research/tur.md section 1):
    ``timestamp.isoformat()``, the type and scope enum values, the sorted tags joined with
    ``,``, the content, ``str()`` of the links as ``{'uri', 'relation'}`` dicts sorted by URI,
    and ``source_session or ""``. Later eras append the three core-memory fields (empty here,
    since a file holding them is skipped) and ``status or ""`` (EP-0113), then
    ``confidence`` (``1.0`` unless written) and the provenance (empty unless written, EP-0131).

    Args:
        timestamp: ``datetime.isoformat()`` of the memory's timestamp, as Tur computes it.
        memory_type, scope: Tur's enum values (lower case).
        tags: the tags as written (duplicates kept, as Tur keeps them).
        content: the content, byte-exact.
        links: ``(uri, relation)`` pairs as written.
        source_session: as written, or ``None``.
        status: the front matter's ``status``, ``None`` when absent (Tur's model then
            defaults it to ``active``; a memory saved with no status hashed ``""``).

    Returns:
        The 7-field payload, then the 11-field and the 13-field payloads for each status
        Tur may have hashed.
    """
    link_dicts = [{"uri": uri, "relation": rel} for uri, rel in sorted(links, key=lambda x: x[0])]
    base = "|".join(
        (
            timestamp,
            memory_type,
            scope,
            ",".join(sorted(tags)),
            content,
            str(link_dicts),
            source_session or "",
        )
    )
    out = [base]
    for state in ("active", "") if status is None else (status,):
        eleven = f"{base}||||{state}"
        out += [eleven, f"{eleven}|1.0|"]
    return out


def _text(fm: Mapping[str, Any], key: str) -> str:
    value = fm[key]
    if not isinstance(value, str):
        raise NotLegacy(f"front matter {key} must be a string, not {type(value).__name__}")
    return value


def _links(fm: Mapping[str, Any]) -> list[tuple[str, str | None]]:
    links = fm.get("links") or []
    if not isinstance(links, list):
        raise NotLegacy("front matter links must be a list")
    pairs: list[tuple[str, str | None]] = []
    for link in links:
        if not isinstance(link, Mapping) or not isinstance(link.get("uri"), str):
            raise NotLegacy(f"a Tur link is a {{uri, relation}} object: {str(link)[:80]}")
        relation = link.get("relation")
        if relation is not None and not isinstance(relation, str):
            raise NotLegacy(f"link relation must be a string or null: {relation!r:.40}")
        pairs.append((link["uri"], relation))
    return pairs


def _check_hash(fm: Mapping[str, Any], name: str, content: str, **fields: Any) -> str:
    """Tur's ``hash``, after checking it against the file name and Tur's own formula."""
    tur_hash = _text(fm, "hash")
    if not HEX64.fullmatch(tur_hash):
        raise NotLegacy(f"front matter hash is not 64-char lowercase hex: {tur_hash[:80]!r}")
    if not name.endswith(f"_{tur_hash}{OKF_SUFFIX}"):
        raise NotLegacy(f"file name does not end in _<hash>.md (hash {tur_hash})")
    payloads = tur_payloads(content=content, **fields)
    if all(hashlib.sha256(p.encode("utf-8")).hexdigest() != tur_hash for p in payloads):
        raise NotLegacy(
            f"Tur's hash {tur_hash} does not match the front matter and content (altered after "
            "Tur wrote it?); left as is"
        )
    return tur_hash


def read_okf(path: Path, rel: str, yaml: Any, *, folder: str) -> Legacy:
    """Parse one Tur OKF memory file for migration (module docstring).

    Args:
        path: the file (a regular file; never followed through a symlink).
        rel: its path relative to the bank, ``/``-separated.
        yaml: the PyYAML module (the caller skips ``.md`` files without it).
        folder: the Tur folder it is in, a key of :data:`TUR_FOLDERS`.

    Returns:
        The :class:`~merkle_memory.bank._legacy.Legacy` to migrate; its ``legacy_id`` is
        Tur's hash, its ``status`` the folder's status (``archived``, ``subsumed``) or, in
        ``active/``, the front matter's.

    Raises:
        NotLegacy: not a Tur memory, or one that cannot be migrated as is (Tur's hash does not
            match, fields that would be lost, an unknown status): skip, untouched.
        ValueError: the file does not parse as OKF (unparseable, untouched).
        BankError, OSError: the file cannot be read.
    """
    front, content = split_okf(read_regular(path))
    try:
        fm = yaml.safe_load(front)
    except Exception as exc:  # PyYAML raises YAMLError, but also others on odd input
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ValueError(f"front matter is not YAML: {first[:120]}") from exc
    if not isinstance(fm, Mapping):
        raise NotLegacy(f"front matter is a {type(fm).__name__}, not a mapping")
    if fm.get("type") != OKF_MEMORY_TYPE:
        raise NotLegacy(f"an OKF file of type {str(fm.get('type'))[:40]!r}, not {OKF_MEMORY_TYPE}")
    if unknown := set(map(str, fm)) - _OKF_KEYS:
        shown = ", ".join(sorted(unknown)[:5])
        raise NotLegacy(f"unknown fields ({shown}); migrating would lose them")
    if missing := [k for k in _REQUIRED if k not in fm]:
        raise NotLegacy(f"not a Tur memory (missing {', '.join(missing)})")
    memory_type = _text(fm, "memory_type").lower()
    scope = _text(fm, "scope").lower()
    tags = fm.get("tags") or []
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise NotLegacy("tags must be a list of strings")
    source_session = fm.get("source_session")
    if source_session is not None and not isinstance(source_session, str):
        raise NotLegacy("source_session must be a string")
    status = fm.get("status")
    if status is not None and not isinstance(status, str):
        raise NotLegacy(f"status must be a string, not {type(status).__name__}")
    raw_time = fm["timestamp"]
    timestamp, naive = parse_timestamp(raw_time)
    tur_time = raw_time if isinstance(raw_time, datetime) else datetime.fromisoformat(raw_time)
    links = _links(fm)
    legacy_id = _check_hash(
        fm,
        path.name,
        content,
        timestamp=tur_time.isoformat(),
        memory_type=memory_type,
        scope=scope,
        tags=tags,
        links=links,
        source_session=source_session,
        status=status,
    )
    folder_status = TUR_FOLDERS[folder]
    archived = goes_to_archive(status, folder_status is not None)
    fields = {
        "type": memory_type,
        "scope": scope,
        "content": content,
        "tags": tags,
        "timestamp": timestamp,
        "source_session": source_session,
    }
    converted = [convert_link({"uri": uri, "relation": rel}) for uri, rel in links]
    shown_status = status if folder_status is None else folder_status
    return Legacy(path, rel, legacy_id, fields, converted, naive, shown_status, archived)
