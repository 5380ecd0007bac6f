"""The ledger: an append-only JSONL hash chain that seals memory records (DESIGN section 4).

:class:`Ledger` appends and recovers one ledger; :func:`verify_ledger` checks a chain and names
every altered, missing, unsealed or disputed record; :class:`Tenant` joins a folder of records
to its ledger (and forgets records with a sealed :class:`Tombstone`,
:mod:`merkle_memory.ledger.tombstones`); :mod:`merkle_memory.ledger.proofs` proves entries
with RFC 6962; :mod:`merkle_memory.ledger.recovery` accepts a refused rollback on the
record. A tenant's testimony mode (RFC 8785, mnemo-cortex's own formula, or salted) is
kept by :mod:`merkle_memory.ledger.settings`. Every byte of a
ledger is reached through one :class:`~merkle_memory.ledger.storage.LedgerStore`;
:class:`FolderLedgerStore` (``ledger.jsonl`` and the files beside it) is the default, and a
path given to ``Ledger`` or ``verify_ledger`` means that store; a ``postgresql://...#tenant``
URL means :class:`PostgresLedgerStore` (many tenants in one database; the extra ``postgres``).
:func:`open_tenant` opens a folder or a database tenant (:class:`PostgresTenant`), and
:func:`export_tenant` / :func:`import_tenant` move a tenant between them byte for byte.
"""

from ._adopt import Holdings, SealReport, seal_if_unsealed, seal_unsealed
from ._chain import Ledger
from ._entry import GENESIS, Entry, entry_hash
from ._folder import FolderLedgerStore, read_head
from ._pgtenant import (
    PostgresTenant,
    export_tenant,
    import_tenant,
    list_postgres_tenants,
    open_tenant,
)
from ._postgres import PostgresLedgerStore
from ._verify import Testimony, VerifyReport, verify_ledger
from .storage import Head, LedgerFile, LedgerStore
from .tenant import Tenant
from .tombstones import ForgetReceipt, Tombstone

__all__ = [
    "GENESIS",
    "Entry",
    "FolderLedgerStore",
    "ForgetReceipt",
    "Head",
    "Holdings",
    "Ledger",
    "LedgerFile",
    "LedgerStore",
    "PostgresLedgerStore",
    "PostgresTenant",
    "SealReport",
    "Tenant",
    "Testimony",
    "Tombstone",
    "VerifyReport",
    "entry_hash",
    "export_tenant",
    "import_tenant",
    "list_postgres_tenants",
    "open_tenant",
    "read_head",
    "seal_if_unsealed",
    "seal_unsealed",
    "verify_ledger",
]
