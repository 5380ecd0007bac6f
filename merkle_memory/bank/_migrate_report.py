"""Result values of a bank migration (private; re-exported by :mod:`merkle_memory.bank`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["MigratedFile", "MigrationIssue", "MigrationReport"]


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
            ``"archived"`` (``memories/archive/``); see ``merkle_memory._banklegacy`` for how
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
