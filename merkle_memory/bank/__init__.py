"""The memory bank: content-addressed memory files, id = hash of the content (Tur EP-0106).

:class:`MemoryBank` saves, reads, archives, consolidates, verifies and migrates memory files
in a folder; :class:`~merkle_memory.bank.memory.Memory` is one memory and its id (DESIGN
section 5).
"""

from ._bank import MemoryBank
from ._migrate_report import MigratedFile, MigrationIssue, MigrationReport
from ._report import BankProblem, BankReport, BankSealReport, StoredMemory
from .memory import Memory

__all__ = [
    "BankProblem",
    "BankReport",
    "BankSealReport",
    "Memory",
    "MemoryBank",
    "MigratedFile",
    "MigrationIssue",
    "MigrationReport",
    "StoredMemory",
]
