"""merkle_memory: content-addressed, tamper-evident memory for AI agents.

Quick start::

    import merkle_memory as mm
    mm.dumps({"b": 1, "a": [1.0, 2e-7]})          # b'{"a":[1,2e-7],"b":1}' (RFC 8785)
    mm.digest({"hello": "world"})                  # 64-char lowercase hex SHA-256 id
    result = mm.import_file("session.jsonl")       # a transcript as Merkle DAG nodes
    mm.Tenant("agents/cc").seal().to_dict()["ok"]  # seal memory records into a hash chain

Five layers, each a module usable alone: ``canonical`` (RFC 8785 bytes and digests),
``projection``/``dag``/``transcripts``/``nodestore`` (conversation Merkle DAGs),
``ledger``/``records``/``tenant`` (the hash-chained ledger), ``memory``/``bank``
(content-addressed memory files) and ``rfc6962``/``proof``/``ledger_proofs``/``checkpoint``
(Merkle proofs and signed checkpoints). Every error raised on purpose is a
``MerkleMemoryError``. Hypothesis strategies live in ``merkle_memory.strategies`` (needs the
``test`` extra; never imported here).

Runtime dependencies: the standard library only (Python >= 3.11).
"""

from . import (
    bank,
    canonical,
    checkpoint,
    dag,
    errors,
    ledger,
    projection,
    proof,
    rfc6962,
    transcripts,
)
from .bank import BankSealReport, MemoryBank, memory
from .bank.memory import Memory
from .canonical import digest, dumps, loads
from .checkpoint import Checkpoint, CheckpointClient, open_checkpoint, sign_checkpoint
from .dag import Bucket, ContentBlock, Dag, DagNode, Forest, Node, node_hash
from .dag import store as nodestore
from .dag.store import MemoryNodeStore, NodeStore, open_store, verify_store
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
    TenantError,
    TranscriptFormatError,
    TreeLogError,
    UnsupportedTypeError,
)
from .ledger import (
    Entry,
    Ledger,
    SealReport,
    Tenant,
    VerifyReport,
    records,
    tenant,
    treelog,
    verify_ledger,
)
from .ledger import proofs as ledger_proofs
from .ledger.proofs import ConsistencyProof, InclusionProof, prove_consistency, prove_inclusion
from .ledger.treelog import TreeLog
from .projection import HARNESS_TAGS, project_content
from .proof import (
    consistency_proof,
    inclusion_proof,
    root_from_inclusion_proof,
    verify_consistency,
    verify_inclusion,
)
from .rfc6962 import EMPTY_ROOT, CompactRange, hash_children, hash_leaf
from .transcripts import ImportResult, detect_format, import_file

__version__ = "0.1.0"

__all__ = [
    "EMPTY_ROOT",
    "HARNESS_TAGS",
    "BankError",
    "BankSealReport",
    "Bucket",
    "CanonicalizationError",
    "Checkpoint",
    "CheckpointClient",
    "CheckpointError",
    "CompactRange",
    "ConsistencyProof",
    "ContentBlock",
    "Dag",
    "DagError",
    "DagNode",
    "DuplicateKeyError",
    "EncodingError",
    "Entry",
    "FloatDomainError",
    "Forest",
    "HashLengthError",
    "ImportResult",
    "InclusionProof",
    "IndexOutOfRangeError",
    "IntegerDomainError",
    "JSONSyntaxError",
    "Ledger",
    "LedgerBrokenError",
    "LedgerError",
    "LedgerFormatError",
    "LedgerRollbackError",
    "Memory",
    "MemoryBank",
    "MemoryFormatError",
    "MemoryNodeStore",
    "MemoryNotFoundError",
    "MerkleMemoryError",
    "NestingDepthError",
    "Node",
    "NodeNotFoundError",
    "NodeStore",
    "NodeStoreError",
    "ProofError",
    "ProofLengthError",
    "RecordError",
    "RootMismatchError",
    "SealReport",
    "SurrogateError",
    "TamperedMemoryError",
    "Tenant",
    "TenantError",
    "TranscriptFormatError",
    "TreeLog",
    "TreeLogError",
    "UnsupportedTypeError",
    "VerifyReport",
    "__version__",
    "bank",
    "canonical",
    "checkpoint",
    "consistency_proof",
    "dag",
    "detect_format",
    "digest",
    "dumps",
    "errors",
    "hash_children",
    "hash_leaf",
    "import_file",
    "inclusion_proof",
    "ledger",
    "ledger_proofs",
    "loads",
    "memory",
    "node_hash",
    "nodestore",
    "open_checkpoint",
    "open_store",
    "project_content",
    "projection",
    "proof",
    "prove_consistency",
    "prove_inclusion",
    "records",
    "rfc6962",
    "root_from_inclusion_proof",
    "sign_checkpoint",
    "tenant",
    "transcripts",
    "treelog",
    "verify_consistency",
    "verify_inclusion",
    "verify_ledger",
    "verify_store",
]
