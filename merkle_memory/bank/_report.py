"""Result values of the memory bank: a stored memory, a problem, the verify and seal reports
(private; re-exported by :mod:`merkle_memory.bank`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .memory import Memory

__all__ = ["BankProblem", "BankReport", "BankSealReport", "StoredMemory"]


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
class BankProblem:
    """One file of the bank that does not verify.

    Attributes:
        path: relative to the bank, ``/``-separated (e.g. ``memories/x.json``).
        kind: ``unparseable`` (not strict JSON, unreadable or over 16 MiB), ``not_a_memory``
            (missing, unknown or invalid fields, another schema, a non-canonical field form),
            ``content_mismatch`` (the content does not hash to the stored id),
            ``name_mismatch`` (the file name does not match the id, type or timestamp),
            ``unexpected_file`` (a symlink, a special file, a non-``.json`` name, a folder).
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
        problems: every file that does not verify, sorted by path.
        leftovers: temp files left by an interrupted write (relative paths); harmless, not a
            failure, and safe to delete.
        ledger: the ledger's verify report as a dict (keys ``ok, chain, entries, broken_at,
            reason, sealed, altered, missing, unsealed, disputed``, DESIGN section 4), or
            ``None`` when it was not checked.
    """

    active: int
    archived: int
    problems: tuple[BankProblem, ...] = ()
    leftovers: tuple[str, ...] = ()
    ledger: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        """True when no file is tampered and the ledger (if checked) is ok."""
        return not self.problems and (self.ledger is None or bool(self.ledger.get("ok")))

    @property
    def tampered(self) -> tuple[str, ...]:
        """The relative paths of the files that do not verify."""
        return tuple(p.path for p in self.problems)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"ok", "active", "archived", "problems": [{"path", "kind",
        "reason"}], "leftovers", "ledger"}``."""
        return {
            "ok": self.ok,
            "active": self.active,
            "archived": self.archived,
            "problems": [p.to_dict() for p in self.problems],
            "leftovers": list(self.leftovers),
            "ledger": self.ledger,
        }


@dataclass(frozen=True, slots=True)
class BankSealReport:
    """The result of ``MemoryBank.seal()`` (DESIGN section 5, last bullet).

    Attributes:
        sealed_ids: ids adopted by this call (``op: "adopt"``), sorted; 64-char lowercase hex.
        ledger: the ledger's verify report after the adoption, as a dict (the keys of
            :attr:`BankReport.ledger`).
        skipped: paths (relative to the bank) of files that do not verify and so were never
            sealed; ``bank verify`` names them with a reason. Not part of :meth:`to_dict`.
    """

    sealed_ids: tuple[str, ...]
    ledger: dict[str, Any]
    skipped: tuple[str, ...] = ()

    @property
    def sealed_now(self) -> int:
        """Number of memories adopted by this call."""
        return len(self.sealed_ids)

    @property
    def ok(self) -> bool:
        """The ledger's ``ok`` after the adoption (nothing altered or missing, chain whole)."""
        return bool(self.ledger.get("ok"))

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"sealed_now": int, "sealed_ids": [id], "ledger": {ok, chain, entries,
        broken_at, reason, sealed, altered, missing, unsealed, disputed}}``."""
        return {
            "sealed_now": self.sealed_now,
            "sealed_ids": list(self.sealed_ids),
            "ledger": self.ledger,
        }
