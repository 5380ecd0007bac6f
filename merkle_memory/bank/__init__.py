"""The memory bank: content-addressed memory files, id = hash of the content (Tur EP-0106).

:class:`MemoryBank` saves, reads, archives, consolidates, verifies, seals and migrates memory
files in a folder; :class:`Memory` (:mod:`merkle_memory.bank.memory`) is one memory and its
id (DESIGN section 5). ``MemoryBank.seal`` returns the ledger's
:class:`~merkle_memory.ledger.SealReport`.

Quick start::

    from merkle_memory.bank import Memory, MemoryBank
    bank = MemoryBank("agent-bank")
    mid = bank.save(Memory("fact", "project", "Project uses FastAPI"))
    bank.verify().ok                 # True
"""

from ._bank import MemoryBank
from ._report import (
    AddResult,
    BankProblem,
    BankReport,
    MigratedFile,
    MigrationIssue,
    MigrationReport,
    StoredMemory,
)
from .memory import Memory

__all__ = [
    "AddResult",
    "BankProblem",
    "BankReport",
    "Memory",
    "MemoryBank",
    "MigratedFile",
    "MigrationIssue",
    "MigrationReport",
    "StoredMemory",
]
