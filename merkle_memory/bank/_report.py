"""Result values of the memory bank (private; re-exported by :mod:`merkle_memory.bank`).

A stored memory and where it is, a file that does not verify, the verify report, the tally of
one scan of both folders (what the ledger is verified and sealed against), and the migration
report. None of them touches the bank: :class:`~merkle_memory.bank.MemoryBank` builds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._files import id_from_name
from .memory import Memory

__all__ = [
    "AddResult",
    "BankProblem",
    "BankReport",
    "MigratedFile",
    "MigrationIssue",
    "MigrationReport",
    "StoredMemory",
    "Tally",
]


@dataclass(frozen=True, slots=True)
class StoredMemory:
    """A memory found in the bank, with where it is.

    Attributes:
        memory: the verified memory.
        archived: ``True`` when the file is in ``memories/archive/`` (L0), else active (L1).
        path: the file's path relative to the bank, ``/``-separated
            (``memories/<name>`` or ``memories/archive/<name>``).
    """

    memory: Memory
    archived: bool
    path: str

    @property
    def status(self) -> str:
        """``"active"`` or ``"archived"`` (where the file is; never a field of the memory)."""
        return "archived" if self.archived else "active"

    def to_dict(self) -> dict[str, Any]:
        """The memory file's object plus ``status`` and ``file`` (the relative path)."""
        return {**self.memory.to_dict(), "status": self.status, "file": self.path}


@dataclass(frozen=True, slots=True)
class AddResult:
    """The result of ``MemoryBank.add``.

    Attributes:
        stored: the memory as it is in the bank now (where, active or archived).
        created: ``True`` when its file was written by this call; ``False`` when the same
            memory was already there (nothing written).
    """

    stored: StoredMemory
    created: bool

    @property
    def id(self) -> str:
        """The memory's id, 64-char lowercase hex."""
        return self.stored.memory.id

    def to_dict(self) -> dict[str, Any]:
        """``{"id", "created", "status" ("active" | "archived"), "file"}`` (``file`` relative
        to the bank)."""
        return {
            "id": self.id,
            "created": self.created,
            "status": self.stored.status,
            "file": self.stored.path,
        }


@dataclass(frozen=True, slots=True)
class BankProblem:
    """One file of the bank that does not verify.

    Attributes:
        path: relative to the bank, ``/``-separated (e.g. ``memories/x.json``).
        kind: ``unparseable`` (not strict JSON, unreadable or over 16 MiB), ``not_a_memory``
            (missing, unknown or invalid fields, another schema, a non-canonical field form),
            ``content_mismatch`` (the content does not hash to the stored id),
            ``name_mismatch`` (the file name does not match the id, type or timestamp),
            ``unexpected_file`` (a symlink, a special file, a non-``.json`` name, a folder),
            ``legacy`` (a legacy memory file, random id and no schema, or a YAML memory
            file: ``MemoryBank.migrate`` rewrites it), ``reappeared`` (a memory that was
            forgotten and whose file is back, e.g. restored from a backup: listed by
            ``MemoryBank.memories`` only; ``verify`` reports it in its ledger part).
        reason: human text with details.
    """

    path: str
    kind: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        """``{"path", "kind", "reason"}``."""
        return {"path": self.path, "kind": self.kind, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class BankReport:
    """The result of ``MemoryBank.verify()``.

    Attributes:
        active: number of active memory files that verify.
        archived: number of archived memory files that verify.
        problems: every file that does not verify: root files that are not regular files
            first (e.g. ``ledger.jsonl``), then ``memories/`` and ``memories/archive/`` by
            name.
        leftovers: temp files left by an interrupted write (relative paths); harmless, not a
            failure, and safe to delete.
        ledger: the ledger's verify report as a dict (keys ``ok, chain, entries, broken_at,
            reason, sealed, altered, missing, unsealed, disputed``, DESIGN section 4, and
            ``forgotten``/``reappeared`` when not empty), or ``None`` when it was not read
            (``ledger.jsonl`` or ``ledger.head`` is not a regular file; that file is then one
            of the ``problems``).
        forgotten_links: ``(path, link)`` of each link ``mm://memory/<id>`` (with or without
            a ``#`` fragment) of a memory that verifies, naming a memory the ledger says was
            forgotten: a dangling link, explained; not a failure.
    """

    active: int
    archived: int
    problems: tuple[BankProblem, ...] = ()
    leftovers: tuple[str, ...] = ()
    ledger: dict[str, Any] | None = None
    forgotten_links: tuple[tuple[str, str], ...] = ()

    @property
    def ok(self) -> bool:
        """True when no file is tampered and the ledger (if checked) is ok."""
        return not self.problems and (self.ledger is None or bool(self.ledger.get("ok")))

    @property
    def tampered(self) -> tuple[str, ...]:
        """The relative paths of the files that do not verify."""
        return tuple(p.path for p in self.problems)

    @property
    def forgotten(self) -> tuple[str, ...]:
        """The ids the ledger says were forgotten (sorted; empty when it was not read)."""
        return tuple(self.ledger.get("forgotten", ())) if self.ledger is not None else ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"ok", "active", "archived", "problems": [{"path", "kind",
        "reason"}], "leftovers", "ledger"}``, plus ``"forgotten_links": [{"path", "link"}]``
        when there is one."""
        out = {
            "ok": self.ok,
            "active": self.active,
            "archived": self.archived,
            "problems": [p.to_dict() for p in self.problems],
            "leftovers": list(self.leftovers),
            "ledger": self.ledger,
        }
        if self.forgotten_links:
            out["forgotten_links"] = [{"path": p, "link": k} for p, k in self.forgotten_links]
        return out


@dataclass(frozen=True, slots=True)
class MigrationIssue:
    """A file left untouched by a migration, or a link kept as it was.

    Attributes:
        path: the file, relative to the bank, ``/``-separated.
        reason: why (for ``unresolved_links``: the link kept).
    """

    path: str
    reason: str

    def to_dict(self) -> dict[str, str]:
        """``{"path", "reason"}``."""
        return {"path": self.path, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class MigratedFile:
    """One legacy file replaced by a content-addressed file.

    Attributes:
        path: the legacy file (now removed), relative to the bank.
        new_path: the content-addressed file, relative to the bank.
        legacy_id: the dropped legacy id (e.g. a UUID).
        id: the new id, 64-char lowercase hex.
        naive_timestamp: the legacy timestamp had no UTC offset and was read as UTC.
        status: the dropped legacy ``status`` (``None`` when absent or not a string).
        twin_existed: the content-addressed file was already there, byte-identical (a rerun
            after a crash); only the legacy file was removed.
        new_status: where the content-addressed file is: ``"active"`` (``memories/``) or
            ``"archived"`` (``memories/archive/``); see :mod:`merkle_memory.bank._legacy` for how
            the legacy status and folder decide it.
    """

    path: str
    new_path: str
    legacy_id: str
    id: str
    naive_timestamp: bool
    status: str | None
    twin_existed: bool
    new_status: str = "active"

    def to_dict(self) -> dict[str, Any]:
        """``{"path", "new_path", "new_status", "legacy_id", "id", "naive_timestamp",
        "status", "twin_existed"}``."""
        return {
            "path": self.path,
            "new_path": self.new_path,
            "new_status": self.new_status,
            "legacy_id": self.legacy_id,
            "id": self.id,
            "naive_timestamp": self.naive_timestamp,
            "status": self.status,
            "twin_existed": self.twin_existed,
        }


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """The result of ``MemoryBank.migrate()``.

    Attributes:
        files: the files migrated, sorted by legacy path.
        unparseable: files that do not parse (JSON, or YAML when PyYAML is importable); left
            untouched.
        skipped: files left untouched for another reason (YAML without PyYAML, unknown
            fields, an invalid field, a duplicate legacy id, a differing twin, a symlink).
        cycles: legacy ids of each cycle of links (sorted within a cycle); links between
            members of a cycle keep the legacy id.
        unresolved_links: links ``mm://memory/<legacy id>`` kept as they were (a cycle, or a
            target not migrated in this run), as ``(path, link)``.
    """

    files: tuple[MigratedFile, ...] = ()
    unparseable: tuple[MigrationIssue, ...] = ()
    skipped: tuple[MigrationIssue, ...] = ()
    cycles: tuple[tuple[str, ...], ...] = ()
    unresolved_links: tuple[MigrationIssue, ...] = ()

    @property
    def migrated(self) -> int:
        """Number of legacy files migrated in this run (0 on a rerun)."""
        return len(self.files)

    @property
    def naive_timestamps(self) -> tuple[str, ...]:
        """Legacy paths whose naive timestamp was read as UTC."""
        return tuple(f.path for f in self.files if f.naive_timestamp)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"migrated": int, "files": [...], "unparseable": [{"path",
        "reason"}], "skipped": [{"path", "reason"}], "naive_timestamps": [path],
        "cycles": [[legacy id]], "unresolved_links": [{"path", "link"}]}``."""
        return {
            "migrated": self.migrated,
            "files": [f.to_dict() for f in self.files],
            "unparseable": [i.to_dict() for i in self.unparseable],
            "skipped": [i.to_dict() for i in self.skipped],
            "naive_timestamps": list(self.naive_timestamps),
            "cycles": [list(c) for c in self.cycles],
            "unresolved_links": [{"path": i.path, "link": i.reason} for i in self.unresolved_links],
        }


@dataclass(frozen=True, slots=True)
class Tally:
    """What one scan of both folders of a bank found (``verify`` and ``seal`` use it).

    Attributes:
        valid: ids of the files that verify, in scan order (active first, by name); the only
            ids ever sealed from a scan.
        active: number of active files that verify.
        archived: number of archived files that verify.
        problems: every file that does not verify, in scan order.
        leftovers: temp files of interrupted writes (paths relative to the bank).
        memory_links: ``(path, link, target id)`` of each ``mm://memory/<id>`` link of the
            files that verify, in scan order.
    """

    valid: tuple[str, ...]
    active: int
    archived: int
    problems: tuple[BankProblem, ...]
    leftovers: tuple[str, ...]
    memory_links: tuple[tuple[str, str, str], ...] = ()

    def unsealable(self) -> dict[str, str]:
        """Memory id -> reason (of the first such file), for each id that only files that do
        not verify are named for."""
        valid = set(self.valid)
        out: dict[str, str] = {}
        for problem in self.problems:
            named = id_from_name(problem.path.rpartition("/")[2])
            if named is not None and named not in valid:
                out.setdefault(named, problem.reason)
        return out

    @property
    def testimony(self) -> dict[str, str]:
        """Memory id -> testimony for ``verify_ledger``: the id itself for a file that
        verifies, ``""`` for an id only tampered files are named for (never matches, so the
        ledger calls that id altered rather than missing)."""
        out = {memory_id: memory_id for memory_id in self.valid}
        out.update(dict.fromkeys(self.unsealable(), ""))
        return out
