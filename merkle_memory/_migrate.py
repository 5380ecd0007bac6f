"""Migration of legacy memory files to content-addressed ones (private; DESIGN section 5).

A legacy file is a JSON (or, when PyYAML is importable, YAML) object with a random ``id``
(e.g. a UUID), an optional ``status``, and the core fields ``type, scope, content, timestamp``
(required) and ``tags, source_session, links`` (optional), under any file name in
``memories/`` or ``memories/archive/``. It becomes a content-addressed file in the same
folder; ``status`` and the old id are dropped. Rules:

- A naive legacy timestamp is read as UTC, and the report lists the file.
- Links: first an object ``{"uri", "relation"}`` becomes ``"<uri>#<relation>"`` (or ``"<uri>"``
  when relation is null); then a link ``mm://memory/<legacy id>`` (with or without a ``#``
  fragment) naming a memory migrated in the same run gets that memory's new id. So memories
  are migrated in dependency order (Tarjan's strongly connected components, emitted targets
  first); links between memories of one cycle keep the legacy id and the report lists the cycle.
- Two phases, so a crash at any point leaves a rerun able to finish: (1) in dependency order,
  write each new file durably (or find its identical content-addressed twin) and seal it
  (a twin only when the ledger has no entry for it: a crash between write and seal);
  (2) in reverse dependency order, remove the legacy files whose replacement is durable. A
  legacy file is thus removed only after every file linking to it, and a rerun after a crash
  still sees the legacy ids it needs to produce the same bytes.
- Idempotent: content-addressed files are not legacy, so a second run migrates nothing.
- A file that does not parse is reported under ``unparseable`` and left untouched; a file that
  cannot be migrated without losing data (unknown fields, a duplicate legacy id, an invalid
  field, a twin that differs) is reported under ``skipped`` and left untouched.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from . import _bankfs, canonical
from ._bankseal import seal_if_unsealed
from ._fsio import atomic_write, fsync_dir
from ._migrate_report import MigratedFile, MigrationIssue, MigrationReport
from .errors import BankError, CanonicalizationError, MemoryFormatError
from .memory import MEMORY_URI_PREFIX, Memory

if TYPE_CHECKING:
    from .bank import MemoryBank

__all__ = ["MigratedFile", "MigrationIssue", "MigrationReport", "migrate_bank"]

_LEGACY_KEYS: Final = frozenset(
    ("id", "status", "type", "scope", "content", "tags", "timestamp", "source_session", "links")
)
_REQUIRED: Final = ("id", "type", "scope", "content", "timestamp")
_YAML_SUFFIXES: Final = (".yaml", ".yml")


@dataclass(slots=True)
class _Legacy:
    path: Path
    rel: str
    legacy_id: str
    fields: dict[str, Any]
    links: list[str]
    naive: bool
    status: Any
    memory: Memory | None = None
    twin: bool = False
    kept: list[str] = field(default_factory=list)


class _NotLegacy(Exception):
    """A file that is not a legacy memory (reason in the message)."""


def _yaml_module() -> Any:
    try:
        return importlib.import_module("yaml")
    except ImportError:
        return None


def _parse_timestamp(value: object) -> tuple[datetime, bool]:
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError as exc:
            raise _NotLegacy(f"timestamp is not ISO 8601: {value[:60]!r}") from exc
    else:
        raise _NotLegacy(f"timestamp must be a string, not {type(value).__name__}")
    if parsed.utcoffset() is None:
        return parsed.replace(tzinfo=UTC), True
    return parsed, False


def _convert_link(link: object) -> str:
    """Step 1: a link object becomes ``<uri>#<relation>`` (or ``<uri>``)."""
    if isinstance(link, str):
        return link
    if isinstance(link, Mapping):
        if set(link) - {"uri", "relation"} or not isinstance(link.get("uri"), str):
            raise _NotLegacy(f"link object must be {{uri, relation}}: {str(link)[:80]}")
        relation = link.get("relation")
        if relation is None:
            return str(link["uri"])
        if not isinstance(relation, str):
            raise _NotLegacy(f"link relation must be a string or null: {relation!r:.40}")
        return f"{link['uri']}#{relation}"
    raise _NotLegacy(f"a link is a string or a {{uri, relation}} object, not {type(link).__name__}")


def _legacy_from_object(obj: object, path: Path, rel: str) -> _Legacy:
    if not isinstance(obj, Mapping):
        raise _NotLegacy(f"not a legacy memory (a {type(obj).__name__}, not an object)")
    if "schema" in obj:
        raise _NotLegacy("not a legacy memory (it has a schema field; see `bank verify`)")
    if unknown := set(map(str, obj)) - _LEGACY_KEYS:
        shown = ", ".join(sorted(unknown)[:5])
        raise _NotLegacy(f"unknown fields ({shown}); migrating would lose them")
    if missing := [k for k in _REQUIRED if k not in obj]:
        raise _NotLegacy(f"not a legacy memory (missing {', '.join(missing)})")
    legacy_id = obj["id"]
    if not isinstance(legacy_id, str) or not legacy_id:
        raise _NotLegacy("legacy id must be a non-empty string")
    timestamp, naive = _parse_timestamp(obj["timestamp"])
    links = obj.get("links") or []
    if not isinstance(links, list):
        raise _NotLegacy("links must be a list")
    tags = obj.get("tags") or []
    if not isinstance(tags, list):
        raise _NotLegacy("tags must be a list")
    fields = {
        "type": obj["type"],
        "scope": obj["scope"],
        "content": obj["content"],
        "tags": tags,
        "timestamp": timestamp,
        "source_session": obj.get("source_session"),
    }
    converted = [_convert_link(link) for link in links]
    return _Legacy(path, rel, legacy_id, fields, converted, naive, obj.get("status"))


def _read_legacy(path: Path, rel: str, yaml: Any) -> _Legacy:
    """Parse one candidate file; raises ``_NotLegacy`` (skip) or ``ValueError`` (unparseable)."""
    data = _bankfs.read_regular(path)
    if path.name.endswith(_YAML_SUFFIXES):
        try:
            obj = yaml.safe_load(data)
        except Exception as exc:  # PyYAML raises YAMLError, but also others on odd input
            raise ValueError(f"not YAML: {str(exc).splitlines()[0][:120]}") from exc
    else:
        try:
            obj = canonical.loads(data)
        except CanonicalizationError as exc:
            raise ValueError(str(exc)) from exc
    return _legacy_from_object(obj, path, rel)


def _scan(bank: MemoryBank, report: _Builder) -> list[_Legacy]:
    yaml = _yaml_module()
    found: list[_Legacy] = []
    for folder in (bank.active_dir, bank.archive_dir):
        try:
            names = sorted(os.listdir(folder))
        except FileNotFoundError:
            continue
        for name in names:
            path = folder / name
            rel = path.relative_to(bank.root).as_posix()
            if (folder == bank.active_dir and name == "archive") or _bankfs.is_temp_name(name):
                continue
            if not stat.S_ISREG(os.lstat(path).st_mode):
                report.skip(rel, "not a regular file (symlinks are never followed)")
                continue
            if name.endswith(_YAML_SUFFIXES) and yaml is None:
                report.skip(rel, "YAML needs PyYAML (install the extra merkle_memory[yaml])")
                continue
            if not name.endswith((".json", *_YAML_SUFFIXES)):
                report.skip(rel, "not a legacy memory file (.json, .yaml or .yml)")
                continue
            if name.endswith(".json") and _bankfs.inspect_file(path).memory is not None:
                continue  # already content-addressed
            try:
                found.append(_read_legacy(path, rel, yaml))
            except _NotLegacy as exc:
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


def _write(bank: MemoryBank, item: _Legacy, memory: Memory) -> bool:
    """Phase 1 for one file: write and seal, or find an identical twin. False: skipped."""
    data = memory.to_bytes()
    target = item.path.parent / memory.file_name
    twin = bank._find(memory.id)
    if twin is not None and twin[0] != item.path:
        if _bankfs.read_regular(twin[0]) != data:
            rel = twin[0].relative_to(bank.root).as_posix()
            raise _NotLegacy(f"its content-addressed twin {rel} exists and differs; left as is")
        fsync_dir(twin[0].parent)  # the twin is durable before the legacy file goes
        seal_if_unsealed(bank, memory.id)  # a crash may have come between write and seal
        item.twin = True
        return True
    atomic_write(target, data, mode=0o444)
    bank._seal(memory.id)
    return True


def migrate_bank(bank: MemoryBank) -> MigrationReport:
    """Migrate every legacy file of ``bank`` (see the module docstring).

    Returns:
        The :class:`MigrationReport`.

    Raises:
        BankError: the bank folder does not exist or cannot be locked, or a folder inside it
            is a symlink. Per-file failures are reported, not raised.
        LedgerError: the ledger refused a seal (files written so far stay, durable and sealed;
            legacy files are not removed, so a rerun finishes the job).
    """
    if not bank.root.is_dir():
        raise BankError(f"no memory bank at {bank.root} (not a folder)")
    report = _Builder()
    with bank._write_lock():
        items = _scan(bank, report)
        by_id: dict[str, list[_Legacy]] = {}
        for item in items:
            by_id.setdefault(item.legacy_id, []).append(item)
        for legacy_id, group in by_id.items():
            if len(group) > 1:
                for item in group:
                    others = ", ".join(o.rel for o in group if o is not item)
                    report.skip(item.rel, f"legacy id {legacy_id!r} is also used by {others}")
        legacy = {lid: group[0] for lid, group in by_id.items() if len(group) == 1}
        edges: dict[str, list[str]] = {}
        for lid, item in legacy.items():
            targets = (_link_target(link) for link in item.links)
            edges[lid] = sorted({t[0] for t in targets if t is not None and t[0] in legacy})
        order = sorted(legacy, key=lambda lid: legacy[lid].rel)
        components = _sccs(order, edges)
        new_ids: dict[str, str] = {}
        done: list[_Legacy] = []
        for component in components:
            cyclic = len(component) > 1 or component[0] in edges[component[0]]
            if cyclic:
                report.cycles.append(tuple(component))
            for lid in component:
                item = legacy[lid]
                links = []
                for link in item.links:
                    target = _link_target(link)
                    if target is not None and target[0] in new_ids:
                        link = MEMORY_URI_PREFIX + new_ids[target[0]] + target[1]
                    elif target is not None and not _is_hex(target[0]):
                        item.kept.append(link)
                    links.append(link)
                try:
                    memory = Memory(**item.fields, links=links)
                    _write(bank, item, memory)
                except (_NotLegacy, MemoryFormatError) as exc:
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
        _remove_legacy(bank, done, report)
    for item in done:
        for link in item.kept:
            report.unresolved.append(MigrationIssue(item.rel, link))
    return report.build()


def _remove_legacy(bank: MemoryBank, done: list[_Legacy], report: _Builder) -> None:
    """Phase 2: remove legacy files, dependents first, each after its replacement is durable."""
    touched: set[Path] = set()
    for item in reversed(done):
        assert item.memory is not None
        new_path = item.path.parent / item.memory.file_name
        found = bank._find(item.memory.id)
        final = found[0] if found is not None else new_path
        if item.path != final:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(item.path)
            touched.add(item.path.parent)
        report.files.append(
            MigratedFile(
                path=item.rel,
                new_path=final.relative_to(bank.root).as_posix(),
                legacy_id=item.legacy_id,
                id=item.memory.id,
                naive_timestamp=item.naive,
                status=item.status if isinstance(item.status, str) else None,
                twin_existed=item.twin,
            )
        )
    for folder in touched:
        fsync_dir(folder)


def _is_hex(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
