"""The ledger: an append-only JSONL hash chain that seals memory records (DESIGN section 4).

:class:`Ledger` appends and recovers one ledger; :func:`verify_ledger` checks a chain and names
every altered, missing, unsealed or disputed record; :class:`Tenant` joins a folder of records
to its ledger; :mod:`merkle_memory.ledger.proofs` proves entries with RFC 6962;
:mod:`merkle_memory.ledger.recovery` accepts a refused rollback on the record. Every byte of a
ledger is reached through one :class:`~merkle_memory.ledger.storage.LedgerStore`;
:class:`FolderLedgerStore` (``ledger.jsonl`` and the files beside it) is the one this library
ships, and a path given to ``Ledger`` or ``verify_ledger`` means that store.
"""

from ._adopt import Holdings, SealReport, seal_if_unsealed, seal_unsealed
from ._chain import Ledger
from ._entry import GENESIS, Entry, entry_hash
from ._folder import FolderLedgerStore, read_head
from ._verify import Testimony, VerifyReport, verify_ledger
from .storage import Head, LedgerFile, LedgerStore
from .tenant import Tenant

__all__ = [
    "GENESIS",
    "Entry",
    "FolderLedgerStore",
    "Head",
    "Holdings",
    "Ledger",
    "LedgerFile",
    "LedgerStore",
    "SealReport",
    "Tenant",
    "Testimony",
    "VerifyReport",
    "entry_hash",
    "read_head",
    "seal_if_unsealed",
    "seal_unsealed",
    "verify_ledger",
]
