"""Migration of legacy memory files: the rules and the steps that need no bank (private).

DESIGN section 5. A legacy file (format: :mod:`merkle_memory.bank._legacy`) is a JSON (or,
when PyYAML is importable, YAML) object with a random ``id`` (e.g. a UUID), an optional
``status``, and the core fields ``type, scope, content, timestamp`` (required) and ``tags,
source_session, links`` (optional), under any file name in ``memories/`` or
``memories/archive/``; or a Tur OKF markdown memory in ``memories/active/``,
``memories/archive/`` or ``memories/subsumed/`` (format: :mod:`merkle_memory.bank._okf`;
``active/`` counts as ``memories/``, ``subsumed/`` as ``memories/archive/``, and Tur's
emptied ``active/`` and ``subsumed/`` folders are removed). It becomes a content-addressed
file; ``status`` and the old id are dropped from the file. Rules:

- Status is where the file is, never a field, so the legacy status picks the folder:

  ===================================================  ==================================
  legacy file                                          replacement goes to
  ===================================================  ==================================
  in ``memories/archive/``, any status                 ``memories/archive/``
  in ``memories/``, status ``archived``, ``subsumed``,  ``memories/archive/``
  ``superseded`` or ``falsified``
  in ``memories/``, no status, ``null``, ``active``    ``memories/``
  or ``pending_approval``
  in ``memories/``, any other status                   skipped, left untouched
  ===================================================  ==================================

  The report gives each file's legacy ``status``, ``new_path`` and ``new_status``.
- A naive legacy timestamp is read as UTC, and the report lists the file.
- Links: first an object ``{"uri", "relation"}`` becomes ``"<uri>#<relation>"`` (or ``"<uri>"``
  when relation is null); then a link ``mm://memory/<legacy id>`` (with or without a ``#``
  fragment) naming a memory migrated in the same run gets that memory's new id (a Tur link
  ``tur://memory/<Tur hash>`` too, the Tur hash being an OKF file's legacy id: it becomes
  ``mm://memory/<new id>``). So memories
  are migrated in dependency order (Tarjan's strongly connected components, emitted targets
  first); links between memories of one cycle keep the legacy id and the report lists the
  cycle. A link naming a legacy id migrated by an earlier run (and not present in this one)
  gets the id recorded in the migration index ``memories/.migrated.json``
  (see below); every other ``mm://memory/<legacy id>`` or ``tur://memory/...`` link is kept
  and listed under ``unresolved_links``.
- Three steps, so a crash at any point leaves a rerun able to finish: (1) in dependency order,
  write each new file durably (or find its identical content-addressed twin) and seal it
  (a twin only when the ledger has no entry for it: a crash between write and seal);
  (2) add the run's ``legacy id -> new id`` pairs to the migration index (atomic write);
  (3) in reverse dependency order, remove the legacy files whose replacement is durable. A
  legacy file is thus removed only after every file linking to it, and a rerun after a crash
  still sees the legacy ids it needs to produce the same bytes.
- Idempotent: content-addressed files are not legacy, so a second run migrates nothing (and
  leaves the index as it is).
- A file that does not parse is reported under ``unparseable`` and left untouched; a file that
  cannot be migrated without losing data (unknown fields, an unknown status, a duplicate
  legacy id, a legacy id the index maps to another memory, an invalid field, a twin that
  differs) is reported under ``skipped`` and left untouched.

The migration index ``BANK/memories/.migrated.json`` holds the RFC 8785 bytes of
``{"ids": {"<legacy id>": "<new id>", ...}, "schema": "migrated/1"}`` (new ids 64-char
lowercase hex). It is not a memory: the file scans of ``verify`` and ``list`` skip it, and
report it only when it does not parse as this format. Memory files never hold the legacy id.

This module holds what needs no bank: the index format (:func:`parse_index`,
:func:`index_bytes`, :func:`check_index`), the link conversion (:func:`replacement`), the
dependency order (:func:`dependency_order`) and the report being built (:class:`ReportBuilder`).
:meth:`merkle_memory.bank.MemoryBank.migrate` lists the files, writes, seals and removes.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

from .. import canonical
from .._json import HEX64
from ..errors import BankError, CanonicalizationError
from ._files import UNEXPECTED_FILE, UNPARSEABLE, NotRegularError, read_regular
from ._legacy import Legacy, NotLegacy
from ._report import MigratedFile, MigrationIssue, MigrationReport
from .memory import MEMORY_URI_PREFIX, Memory, is_memory_id

__all__ = [
    "INDEX_NAME",
    "INDEX_SCHEMA",
    "TUR_MEMORY_URI_PREFIX",
    "ReportBuilder",
    "check_index",
    "dependency_order",
    "index_bytes",
    "merged_index",
    "parse_index",
    "replacement",
    "unique_ids",
]

TUR_MEMORY_URI_PREFIX: Final = "tur://memory/"
"""Tur's memory links: ``tur://memory/<Tur hash>``, resolved like ``mm://memory/<legacy id>``."""

INDEX_NAME: Final = ".migrated.json"
"""File name of the migration index, inside ``memories/``."""

INDEX_SCHEMA: Final = "migrated/1"
"""Value of the index's ``schema`` field."""


# --- the migration index ---------------------------------------------------------------------


def parse_index(data: bytes) -> dict[str, str]:
    """The ``{legacy id: new id}`` map of an index file's bytes.

    Raises:
        BankError: not strict JSON, not ``{"ids", "schema"}``, another schema, or an entry
            with an empty legacy id or a new id that is not 64-char lowercase hex.
    """
    try:
        obj = canonical.loads(data)
    except CanonicalizationError as exc:
        raise BankError(f"not JSON: {exc}") from exc
    if not isinstance(obj, dict) or set(obj) != {"ids", "schema"}:
        raise BankError('not a migration index (expected the keys "ids" and "schema")')
    if obj["schema"] != INDEX_SCHEMA:
        raise BankError(f"unknown schema {str(obj['schema'])[:40]!r} (expected {INDEX_SCHEMA})")
    ids = obj["ids"]
    if not isinstance(ids, Mapping):
        raise BankError('"ids" must be an object')
    out: dict[str, str] = {}
    for legacy_id, new_id in ids.items():
        if not legacy_id or not is_memory_id(new_id):
            raise BankError(f"bad entry {legacy_id[:40]!r}: {str(new_id)[:80]!r}")
        out[legacy_id] = str(new_id)
    return out


def index_bytes(ids: Mapping[str, str]) -> bytes:
    """The RFC 8785 bytes of an index holding ``ids`` (``{legacy id: new id}``)."""
    return canonical.dumps({"ids": dict(ids), "schema": INDEX_SCHEMA})


def check_index(path: str | os.PathLike[str]) -> tuple[str, str] | None:
    """``None`` when the index at ``path`` is well formed or absent, else ``(kind, reason)``
    for ``verify`` (a ``BankProblem`` kind: ``unexpected_file`` or ``unparseable``)."""
    try:
        parse_index(read_regular(path))
    except NotRegularError as exc:
        return UNEXPECTED_FILE, f"migration index: {exc}"
    except FileNotFoundError:
        return None
    except (BankError, OSError) as exc:
        return UNPARSEABLE, f"migration index: {exc}"
    return None


def merged_index(earlier: Mapping[str, str], done: Iterable[Legacy]) -> dict[str, str] | None:
    """``earlier`` plus the ``legacy id -> new id`` pairs of ``done``; ``None`` when unchanged.

    Every item of ``done`` has its ``memory`` set (written or found).
    """
    merged = dict(earlier)
    for item in done:
        assert item.memory is not None
        merged[item.legacy_id] = item.memory.id
    return None if merged == earlier else merged


# --- links and order ------------------------------------------------------------------------


def _link_target(link: str) -> tuple[str, str] | None:
    """``(legacy id, "#fragment" or "")`` of an ``mm://memory/...`` or ``tur://memory/...``
    link, else ``None``."""
    for prefix in (MEMORY_URI_PREFIX, TUR_MEMORY_URI_PREFIX):
        if link.startswith(prefix):
            target, sep, fragment = link[len(prefix) :].partition("#")
            return target, sep + fragment
    return None


def _resolve_links(
    item: Legacy,
    new_ids: Mapping[str, str],
    earlier: Mapping[str, str],
    legacy: Mapping[str, Legacy],
) -> list[str]:
    """Step 2 of the link conversion for one file.

    A link ``mm://memory/<legacy id>[#fragment]`` gets the new id of a memory migrated earlier
    in this run (``new_ids``) or, when the legacy id is not among this run's files, by an
    earlier run (``earlier``, the migration index). A ``tur://memory/<Tur hash>[#fragment]``
    link (Tur's own memory links) is resolved the same way, to an ``mm://memory/`` link.
    Other ``mm://memory/`` links whose target is not a 64-hex id, and every other
    ``tur://memory/`` link, are kept as they are and recorded in ``item.kept``.
    """
    links = []
    for link in item.links:
        target = _link_target(link)
        if target is not None:
            legacy_id, fragment = target
            if legacy_id in new_ids:
                link = MEMORY_URI_PREFIX + new_ids[legacy_id] + fragment
            elif legacy_id not in legacy and legacy_id in earlier:
                link = MEMORY_URI_PREFIX + earlier[legacy_id] + fragment
            elif link.startswith(TUR_MEMORY_URI_PREFIX) or not HEX64.fullmatch(legacy_id):
                item.kept.append(link)
        links.append(link)
    return links


def replacement(
    item: Legacy,
    new_ids: Mapping[str, str],
    earlier: Mapping[str, str],
    legacy: Mapping[str, Legacy],
) -> Memory:
    """The content-addressed memory replacing the legacy file ``item``.

    Args:
        item: the legacy file; its kept (unresolved) links are recorded in ``item.kept``.
        new_ids: legacy id -> new id of the memories migrated so far in this run.
        earlier: the migration index (legacy id -> new id of earlier runs).
        legacy: this run's legacy files by legacy id.

    Raises:
        MemoryFormatError: a field is invalid.
        NotLegacy: the index maps this legacy id to another memory (skip, untouched).
    """
    memory = Memory(**item.fields, links=_resolve_links(item, new_ids, earlier, legacy))
    if (previous := earlier.get(item.legacy_id)) is not None and previous != memory.id:
        raise NotLegacy(
            f"legacy id {item.legacy_id!r} was migrated by an earlier run to {previous}, "
            f"but this file gives {memory.id}; left as is"
        )
    return memory


def _sccs(nodes: list[str], edges: Mapping[str, list[str]]) -> list[list[str]]:
    """Strongly connected components (Tarjan, iterative), each after every one it reaches."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work: list[tuple[str, Iterator[str]]] = [(root, iter(edges[root]))]
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(edges[succ])))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component: list[str] = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    out.append(sorted(component))
    return out


def dependency_order(legacy: Mapping[str, Legacy]) -> list[tuple[list[str], bool]]:
    """The legacy ids in migration order: linked memories first.

    Args:
        legacy: this run's legacy files by legacy id (each id used by one file).

    Returns:
        The strongly connected components of the link graph (sorted legacy ids each), every
        one after the components it links to, starting from the files sorted by path; with
        each, whether it is a cycle (more than one member, or a file linking to itself).
    """
    edges: dict[str, list[str]] = {}
    for lid, item in legacy.items():
        targets = (_link_target(link) for link in item.links)
        edges[lid] = sorted({t[0] for t in targets if t is not None and t[0] in legacy})
    order = sorted(legacy, key=lambda lid: legacy[lid].rel)
    return [
        (component, len(component) > 1 or component[0] in edges[component[0]])
        for component in _sccs(order, edges)
    ]


# --- the report -----------------------------------------------------------------------------


@dataclass(slots=True)
class ReportBuilder:
    """The :class:`MigrationReport` of a run, as it is built (mutable working state).

    Attributes:
        files, unparseable, skipped, cycles: as the report's fields, in the order found
            (:meth:`build` sorts them).
    """

    files: list[MigratedFile] = field(default_factory=list)
    unparseable: list[MigrationIssue] = field(default_factory=list)
    skipped: list[MigrationIssue] = field(default_factory=list)
    cycles: list[tuple[str, ...]] = field(default_factory=list)

    def skip(self, rel: str, reason: str) -> None:
        """Record the file ``rel`` (relative to the bank) as skipped, left untouched."""
        self.skipped.append(MigrationIssue(rel, reason))

    def build(self, done: Iterable[Legacy]) -> MigrationReport:
        """The report, with the links kept unresolved in each file of ``done``."""
        unresolved = [MigrationIssue(item.rel, link) for item in done for link in item.kept]
        return MigrationReport(
            files=tuple(sorted(self.files, key=lambda f: f.path)),
            unparseable=tuple(sorted(self.unparseable, key=lambda i: i.path)),
            skipped=tuple(sorted(self.skipped, key=lambda i: i.path)),
            cycles=tuple(self.cycles),
            unresolved_links=tuple(unresolved),
        )


def unique_ids(items: list[Legacy], report: ReportBuilder) -> dict[str, Legacy]:
    """Legacy id -> file, leaving out (and reporting) every legacy id used by two files."""
    by_id: dict[str, list[Legacy]] = {}
    for item in items:
        by_id.setdefault(item.legacy_id, []).append(item)
    for legacy_id, group in by_id.items():
        if len(group) > 1:
            for item in group:
                others = ", ".join(o.rel for o in group if o is not item)
                report.skip(item.rel, f"legacy id {legacy_id!r} is also used by {others}")
    return {lid: group[0] for lid, group in by_id.items() if len(group) == 1}
