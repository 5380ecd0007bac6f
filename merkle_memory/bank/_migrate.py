"""Migration of legacy memory files to content-addressed ones (private; DESIGN section 5).

A legacy file (format: :mod:`merkle_memory._banklegacy`) is a JSON (or, when PyYAML is
importable, YAML) object with a random ``id`` (e.g. a UUID), an optional ``status``, and the
core fields ``type, scope, content, timestamp`` (required) and ``tags, source_session, links``
(optional), under any file name in ``memories/`` or ``memories/archive/``. It becomes a
content-addressed file; ``status`` and the old id are dropped from the file. Rules:

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
  fragment) naming a memory migrated in the same run gets that memory's new id. So memories
  are migrated in dependency order (Tarjan's strongly connected components, emitted targets
  first); links between memories of one cycle keep the legacy id and the report lists the
  cycle. A link naming a legacy id migrated by an earlier run (and not present in this one)
  gets the id recorded in the migration index ``memories/.migrated.json``
  (:mod:`merkle_memory._bankmigrated`); every other ``mm://memory/<legacy id>`` link is kept
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
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .._fsio import atomic_write, fsync_dir
from ..errors import BankError, MemoryFormatError
from . import _files as _bankfs
from ._legacy import YAML_SUFFIXES, Legacy, NotLegacy, read_legacy, yaml_module
from ._migrate_report import MigratedFile, MigrationIssue, MigrationReport
from ._migrated import INDEX_NAME, read_index, write_index
from ._seal import seal_if_unsealed
from .memory import MEMORY_URI_PREFIX, Memory

if TYPE_CHECKING:
    from ._bank import MemoryBank

__all__ = ["MigratedFile", "MigrationIssue", "MigrationReport", "migrate_bank"]


def _scan(bank: MemoryBank, report: _Builder) -> list[Legacy]:
    yaml = yaml_module()
    found: list[Legacy] = []
    for folder in (bank.active_dir, bank.archive_dir):
        in_archive = folder == bank.archive_dir
        try:
            names = sorted(os.listdir(folder))
        except FileNotFoundError:
            continue
        for name in names:
            path = folder / name
            rel = path.relative_to(bank.root).as_posix()
            if not in_archive and name in ("archive", INDEX_NAME):
                continue
            if _bankfs.is_temp_name(name):
                continue
            try:
                regular = stat.S_ISREG(os.lstat(path).st_mode)
            except FileNotFoundError:
                continue
            if not regular:
                report.skip(rel, "not a regular file (symlinks are never followed)")
                continue
            if name.endswith(YAML_SUFFIXES) and yaml is None:
                report.skip(rel, "YAML needs PyYAML (install the extra merkle_memory[yaml])")
                continue
            if not name.endswith((".json", *YAML_SUFFIXES)):
                report.skip(rel, "not a legacy memory file (.json, .yaml or .yml)")
                continue
            if name.endswith(".json") and _bankfs.inspect_file(path).memory is not None:
                continue  # already content-addressed
            try:
                found.append(read_legacy(path, rel, yaml, in_archive=in_archive))
            except NotLegacy as exc:
                report.skip(rel, str(exc))
            except (ValueError, BankError, OSError) as exc:
                report.unparseable.append(MigrationIssue(rel, f"unparseable: {exc}"))
    return found


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


def _link_target(link: str) -> tuple[str, str] | None:
    """``(legacy id, "#fragment" or "")`` of an ``mm://memory/...`` link, else ``None``."""
    if not link.startswith(MEMORY_URI_PREFIX):
        return None
    target, sep, fragment = link[len(MEMORY_URI_PREFIX) :].partition("#")
    return target, sep + fragment


@dataclass(slots=True)
class _Builder:
    files: list[MigratedFile] = field(default_factory=list)
    unparseable: list[MigrationIssue] = field(default_factory=list)
    skipped: list[MigrationIssue] = field(default_factory=list)
    cycles: list[tuple[str, ...]] = field(default_factory=list)
    unresolved: list[MigrationIssue] = field(default_factory=list)

    def skip(self, rel: str, reason: str) -> None:
        self.skipped.append(MigrationIssue(rel, reason))

    def build(self) -> MigrationReport:
        return MigrationReport(
            files=tuple(sorted(self.files, key=lambda f: f.path)),
            unparseable=tuple(sorted(self.unparseable, key=lambda i: i.path)),
            skipped=tuple(sorted(self.skipped, key=lambda i: i.path)),
            cycles=tuple(self.cycles),
            unresolved_links=tuple(self.unresolved),
        )


def _write(bank: MemoryBank, item: Legacy, memory: Memory) -> None:
    """Phase 1 for one file: write and seal, or find an identical twin; sets ``item.final``.

    Raises:
        NotLegacy: a content-addressed twin exists and differs (skip, untouched).
        BankError, OSError: the write failed (skip, untouched).
    """
    data = memory.to_bytes()
    folder = bank.archive_dir if item.archived else bank.active_dir
    target = folder / memory.file_name
    twin = bank._find(memory.id)
    if twin is not None and twin[0] != item.path:
        if _bankfs.read_regular(twin[0]) != data:
            rel = bank._rel(twin[0])
            raise NotLegacy(f"its content-addressed twin {rel} exists and differs; left as is")
        fsync_dir(twin[0].parent)  # the twin is durable before the legacy file goes
        seal_if_unsealed(bank, memory.id)  # a crash may have come between write and seal
        item.twin = True
        item.final = twin[0]
        return
    if item.archived:
        bank._ensure_dir(bank.archive_dir)
    atomic_write(target, data, mode=0o444)
    bank._seal(memory.id)
    item.final = target


def _resolve_links(
    item: Legacy,
    new_ids: Mapping[str, str],
    earlier: Mapping[str, str],
    legacy: Mapping[str, Legacy],
) -> list[str]:
    """Step 2 of the link conversion for one file.

    A link ``mm://memory/<legacy id>[#fragment]`` gets the new id of a memory migrated earlier
    in this run (``new_ids``) or, when the legacy id is not among this run's files, by an
    earlier run (``earlier``, the migration index). Other ``mm://memory/`` links whose target
    is not a 64-hex id are kept as they are and recorded in ``item.kept``.
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
            elif not _is_hex(legacy_id):
                item.kept.append(link)
        links.append(link)
    return links


def _unique(items: list[Legacy], report: _Builder) -> dict[str, Legacy]:
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


def migrate_bank(bank: MemoryBank) -> MigrationReport:
    """Migrate every legacy file of ``bank`` (see the module docstring).

    Returns:
        The :class:`MigrationReport`.

    Raises:
        BankError: the folder is not a bank (nothing is created), cannot be locked, holds a
            symlinked folder, or its migration index is unreadable or cannot be written
            (then no legacy file is removed). Per-file failures are reported, not raised.
        LedgerError: the ledger refused a seal (files written so far stay, durable and sealed;
            legacy files are not removed, so a rerun finishes the job).
    """
    bank._require_root()
    report = _Builder()
    with bank._write_lock():
        earlier = read_index(bank)
        legacy = _unique(_scan(bank, report), report)
        edges: dict[str, list[str]] = {}
        for lid, item in legacy.items():
            targets = (_link_target(link) for link in item.links)
            edges[lid] = sorted({t[0] for t in targets if t is not None and t[0] in legacy})
        order = sorted(legacy, key=lambda lid: legacy[lid].rel)
        new_ids: dict[str, str] = {}
        done: list[Legacy] = []
        for component in _sccs(order, edges):
            if len(component) > 1 or component[0] in edges[component[0]]:
                report.cycles.append(tuple(component))
            for lid in component:
                item = legacy[lid]
                try:
                    memory = Memory(
                        **item.fields, links=_resolve_links(item, new_ids, earlier, legacy)
                    )
                    if (previous := earlier.get(lid)) is not None and previous != memory.id:
                        raise NotLegacy(
                            f"legacy id {lid!r} was migrated by an earlier run to {previous}, "
                            f"but this file gives {memory.id}; left as is"
                        )
                    _write(bank, item, memory)
                except (NotLegacy, MemoryFormatError) as exc:
                    report.skip(item.rel, str(exc))
                    continue
                except (OSError, BankError) as exc:
                    report.skip(item.rel, f"could not write its replacement: {exc}")
                    continue
                item.memory = memory
                done.append(item)
            # Only now: links between members of one cycle keep the legacy id.
            for lid in component:
                if (memory_done := legacy[lid].memory) is not None:
                    new_ids[lid] = memory_done.id
        _record(bank, earlier, done)
        _remove_legacy(bank, done, report)
    for item in done:
        for link in item.kept:
            report.unresolved.append(MigrationIssue(item.rel, link))
    return report.build()


def _record(bank: MemoryBank, earlier: dict[str, str], done: list[Legacy]) -> None:
    """Add this run's ids to the migration index, durably, before any legacy file goes."""
    merged = dict(earlier)
    for item in done:
        assert item.memory is not None
        merged[item.legacy_id] = item.memory.id
    if merged == earlier:
        return
    try:
        write_index(bank, merged)
    except OSError as exc:
        raise BankError(
            f"cannot write the migration index memories/{INDEX_NAME}: "
            f"{exc.strerror or exc}; no legacy file was removed (run migrate again)"
        ) from exc


def _remove_legacy(bank: MemoryBank, done: list[Legacy], report: _Builder) -> None:
    """Phase 2: remove legacy files, dependents first, each after its replacement is durable."""
    touched: set[Path] = set()
    for item in reversed(done):
        assert item.memory is not None and item.final is not None
        if item.path != item.final:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(item.path)
            touched.add(item.path.parent)
        report.files.append(
            MigratedFile(
                path=item.rel,
                new_path=bank._rel(item.final),
                legacy_id=item.legacy_id,
                id=item.memory.id,
                naive_timestamp=item.naive,
                status=item.status if isinstance(item.status, str) else None,
                twin_existed=item.twin,
                new_status="archived" if item.final.parent == bank.archive_dir else "active",
            )
        )
    for folder in touched:
        fsync_dir(folder)


def _is_hex(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
