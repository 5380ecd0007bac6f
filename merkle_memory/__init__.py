"""merkle_memory: content-addressed, tamper-evident memory for AI agents.

Quick start::

    import merkle_memory as mm
    mm.canonical.dumps({"b": 1, "a": [1.0, 2e-7]})   # b'{"a":[1,2e-7],"b":1}' (RFC 8785)
    mm.digest({"hello": "world"})                     # 64-char lowercase hex SHA-256 id

Runtime dependencies: the standard library only (Python >= 3.11).
"""

from . import canonical
from .canonical import digest, dumps, loads
from .errors import (
    BankError,
    CanonicalizationError,
    CheckpointError,
    DagError,
    DuplicateKeyError,
    EncodingError,
    FloatDomainError,
    HashLengthError,
    IndexOutOfRangeError,
    IntegerDomainError,
    JSONSyntaxError,
    LedgerBrokenError,
    LedgerError,
    LedgerFormatError,
    LedgerRollbackError,
    MemoryFormatError,
    MemoryNotFoundError,
    MerkleMemoryError,
    NestingDepthError,
    NodeNotFoundError,
    NodeStoreError,
    ProofError,
    ProofLengthError,
    RecordError,
    RootMismatchError,
    SurrogateError,
    TamperedMemoryError,
    TranscriptFormatError,
    TreeLogError,
    UnsupportedTypeError,
)

__version__ = "0.1.0"

__all__ = [
    "BankError",
    "CanonicalizationError",
    "CheckpointError",
    "DagError",
    "DuplicateKeyError",
    "EncodingError",
    "FloatDomainError",
    "HashLengthError",
    "IndexOutOfRangeError",
    "IntegerDomainError",
    "JSONSyntaxError",
    "LedgerBrokenError",
    "LedgerError",
    "LedgerFormatError",
    "LedgerRollbackError",
    "MemoryFormatError",
    "MemoryNotFoundError",
    "MerkleMemoryError",
    "NestingDepthError",
    "NodeNotFoundError",
    "NodeStoreError",
    "ProofError",
    "ProofLengthError",
    "RecordError",
    "RootMismatchError",
    "SurrogateError",
    "TamperedMemoryError",
    "TranscriptFormatError",
    "TreeLogError",
    "UnsupportedTypeError",
    "__version__",
    "canonical",
    "digest",
    "dumps",
    "loads",
]
