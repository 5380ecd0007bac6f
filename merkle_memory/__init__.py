"""merkle_memory: content-addressed, tamper-evident memory for AI agents.

Quick start::

    import merkle_memory as mm
    mm.dumps({"b": 1, "a": [1.0, 2e-7]})          # b'{"a":[1,2e-7],"b":1}' (RFC 8785)
    mm.digest({"hello": "world"})                  # 64-char lowercase hex SHA-256 id
    result = mm.import_file("session.jsonl")       # a transcript as Merkle DAG nodes
    mm.Tenant("agents/cc").seal().to_dict()["ok"]  # seal memory records into a hash chain

One package per concept, each usable alone: ``canonical`` (RFC 8785 bytes and digests),
``projection``/``dag``/``transcripts`` (conversation Merkle DAGs and their node stores),
``ledger`` (the hash-chained ledger, its records, tenants, Merkle sidecar and proofs),
``bank`` (content-addressed memory files) and ``rfc6962``/``proof``/``checkpoint`` (Merkle
proofs and signed checkpoints). Every error raised on purpose is a ``MerkleMemoryError``;
``__all__`` names the base of each error family, and every error class is importable from
here and from ``merkle_memory.errors``. Hypothesis strategies live in
``merkle_memory.strategies`` (needs the ``test`` extra; never imported here).

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
from .bank import MemoryBank
from .bank.memory import Memory
from .canonical import digest, dump, dumps, loads
from .checkpoint import Checkpoint, CheckpointClient, open_checkpoint, sign_checkpoint
from .dag import Bucket, ContentBlock, Dag, DagNode, Forest, Node, node_hash
from .dag.store import MemoryNodeStore, NodeStore, open_store, verify_store

# Every error class is importable from the package (DESIGN section 1); __all__ lists the
# family bases, the rest stay reachable as attributes and from merkle_memory.errors.
from .errors import BankError as BankError
from .errors import CanonicalizationError as CanonicalizationError
from .errors import CheckpointError as CheckpointError
from .errors import ContentBlockError as ContentBlockError
from .errors import DagError as DagError
from .errors import DatabaseError as DatabaseError
from .errors import DuplicateKeyError as DuplicateKeyError
from .errors import EncodingError as EncodingError
from .errors import FloatDomainError as FloatDomainError
from .errors import HashLengthError as HashLengthError
from .errors import IndexOutOfRangeError as IndexOutOfRangeError
from .errors import IntegerDomainError as IntegerDomainError
from .errors import JSONSyntaxError as JSONSyntaxError
from .errors import LedgerBrokenError as LedgerBrokenError
from .errors import LedgerError as LedgerError
from .errors import LedgerFormatError as LedgerFormatError
from .errors import LedgerRollbackError as LedgerRollbackError
from .errors import MemoryFormatError as MemoryFormatError
from .errors import MemoryNotFoundError as MemoryNotFoundError
from .errors import MerkleMemoryError as MerkleMemoryError
from .errors import NestingDepthError as NestingDepthError
from .errors import NodeFormatError as NodeFormatError
from .errors import NodeNotFoundError as NodeNotFoundError
from .errors import NodeStoreError as NodeStoreError
from .errors import ProofError as ProofError
from .errors import ProofLengthError as ProofLengthError
from .errors import RecordError as RecordError
from .errors import RootMismatchError as RootMismatchError
from .errors import StoreFileError as StoreFileError
from .errors import SurrogateError as SurrogateError
from .errors import TamperedMemoryError as TamperedMemoryError
from .errors import TenantError as TenantError
from .errors import TileError as TileError
from .errors import TileNotFoundError as TileNotFoundError
from .errors import TranscriptFormatError as TranscriptFormatError
from .errors import TreeLogError as TreeLogError
from .errors import UnsupportedTypeError as UnsupportedTypeError
from .errors import WitnessError as WitnessError
from .ledger import Entry, Ledger, SealReport, Tenant, VerifyReport, verify_ledger
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
    "Bucket",
    "CanonicalizationError",
    "Checkpoint",
    "CheckpointClient",
    "CompactRange",
    "ConsistencyProof",
    "ContentBlock",
    "Dag",
    "DagError",
    "DagNode",
    "DatabaseError",
    "Entry",
    "Forest",
    "ImportResult",
    "InclusionProof",
    "Ledger",
    "LedgerError",
    "Memory",
    "MemoryBank",
    "MemoryNodeStore",
    "MerkleMemoryError",
    "Node",
    "NodeStore",
    "NodeStoreError",
    "ProofError",
    "SealReport",
    "Tenant",
    "TranscriptFormatError",
    "TreeLog",
    "VerifyReport",
    "WitnessError",
    "__version__",
    "bank",
    "canonical",
    "checkpoint",
    "consistency_proof",
    "dag",
    "detect_format",
    "digest",
    "dump",
    "dumps",
    "errors",
    "hash_children",
    "hash_leaf",
    "import_file",
    "inclusion_proof",
    "ledger",
    "loads",
    "node_hash",
    "open_checkpoint",
    "open_store",
    "project_content",
    "projection",
    "proof",
    "prove_consistency",
    "prove_inclusion",
    "rfc6962",
    "root_from_inclusion_proof",
    "sign_checkpoint",
    "transcripts",
    "verify_consistency",
    "verify_inclusion",
    "verify_ledger",
    "verify_store",
]
