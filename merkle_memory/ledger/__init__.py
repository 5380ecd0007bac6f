"""The ledger: an append-only JSONL hash chain that seals memory records (DESIGN section 4).

:class:`Ledger` appends and recovers one ``ledger.jsonl``; :func:`verify_ledger` checks a chain
and names every altered, missing, unsealed or disputed record; :class:`Tenant` joins a folder of
records to its ledger; :mod:`merkle_memory.ledger.proofs` proves entries with RFC 6962.
"""

from ._adopt import Holdings, SealReport, seal_if_unsealed, seal_unsealed
from ._chain import Ledger
from ._entry import GENESIS, Entry, entry_hash
from ._tail import Head, read_head
from ._verify import Testimony, VerifyReport, verify_ledger
from .tenant import Tenant

__all__ = [
    "GENESIS",
    "Entry",
    "Head",
    "Holdings",
    "Ledger",
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
