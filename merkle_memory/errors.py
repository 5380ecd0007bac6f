"""The one exception hierarchy of merkle_memory.

Every error this library raises on purpose is a :class:`MerkleMemoryError`. Subclasses that
reject a value also subclass the builtin a Python user would catch (``ValueError`` or
``TypeError``), so ``except ValueError`` keeps working around canonicalization.

Shape of the tree::

    MerkleMemoryError
    ├── CanonicalizationError (ValueError)
    │   ├── IntegerDomainError
    │   ├── FloatDomainError
    │   ├── SurrogateError
    │   ├── DuplicateKeyError
    │   ├── NestingDepthError
    │   ├── UnsupportedTypeError (also TypeError)
    │   ├── EncodingError
    │   └── JSONSyntaxError
    ├── ProofError (ValueError)
    │   ├── RootMismatchError
    │   ├── ProofLengthError
    │   ├── HashLengthError
    │   ├── IndexOutOfRangeError
    │   ├── CheckpointError
    │   └── TileError
    │       └── TileNotFoundError (LookupError)
    ├── LedgerError
    │   ├── LedgerBrokenError
    │   ├── LedgerRollbackError
    │   ├── LedgerFormatError (ValueError)
    │   ├── RecordError (ValueError)
    │   ├── StoreFileError
    │   ├── TenantError
    │   └── TreeLogError
    ├── TranscriptFormatError (ValueError)
    ├── DagError (ValueError)
    │   ├── ContentBlockError
    │   └── NodeFormatError
    ├── NodeStoreError
    │   └── NodeNotFoundError (LookupError)
    ├── DatabaseError
    ├── BankError
    │   ├── MemoryFormatError (ValueError)
    │   ├── MemoryNotFoundError (LookupError)
    │   └── TamperedMemoryError
    └── WitnessError
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BankError",
    "CanonicalizationError",
    "CheckpointError",
    "ContentBlockError",
    "DagError",
    "DatabaseError",
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
    "NodeFormatError",
    "NodeNotFoundError",
    "NodeStoreError",
    "ProofError",
    "ProofLengthError",
    "RecordError",
    "RootMismatchError",
    "StoreFileError",
    "SurrogateError",
    "TamperedMemoryError",
    "TenantError",
    "TileError",
    "TileNotFoundError",
    "TranscriptFormatError",
    "TreeLogError",
    "UnsupportedTypeError",
    "WitnessError",
]


class MerkleMemoryError(Exception):
    """Base class of every error raised on purpose by merkle_memory."""


# --- canonical JSON (RFC 8785) -------------------------------------------------------------


class CanonicalizationError(MerkleMemoryError, ValueError):
    """A value or a JSON text lies outside the RFC 8785 (I-JSON) domain.

    Attributes:
        value: the offending Python value or text fragment, when there is one (else ``None``).
    """

    def __init__(self, message: str, value: Any = None) -> None:
        super().__init__(message)
        self.value = value


class IntegerDomainError(CanonicalizationError):
    """An integer outside +-(2**53 - 1) (RFC 8785 Appendix B note 1; store big ids as strings)."""


class FloatDomainError(CanonicalizationError):
    """NaN, +-Infinity, or a number literal that overflows to infinity (RFC 8785 §3.2.2.3)."""


class SurrogateError(CanonicalizationError):
    """A lone UTF-16 surrogate in a string or key (RFC 8785 §3.2.2.2), or invalid UTF-8 input."""


class DuplicateKeyError(CanonicalizationError):
    """A JSON object names the same property twice (RFC 8785 §3.1, I-JSON)."""


class NestingDepthError(CanonicalizationError):
    """Arrays and objects nested deeper than the documented limit."""


class UnsupportedTypeError(CanonicalizationError, TypeError):
    """A Python value of a type with no JSON meaning (sets, bytes, non-str keys, ...)."""


class EncodingError(CanonicalizationError):
    """Input bytes that are not UTF-8, or that start with a byte-order mark (RFC 8785 §3.2.4)."""


class JSONSyntaxError(CanonicalizationError):
    """Text that is not JSON: a syntax error, trailing data, or an empty document.

    Attributes:
        pos: 0-based character offset of the error in the decoded text, or ``None``.
    """

    def __init__(self, message: str, value: Any = None, pos: int | None = None) -> None:
        super().__init__(message, value)
        self.pos = pos


# --- proofs and checkpoints (RFC 6962) -----------------------------------------------------


class ProofError(MerkleMemoryError, ValueError):
    """A Merkle inclusion or consistency proof, or a checkpoint, does not verify."""


class RootMismatchError(ProofError):
    """The root recomputed from a proof differs from the trusted root.

    Attributes:
        expected: the trusted root, 32 bytes.
        calculated: the root the proof leads to, 32 bytes.
        where: what was checked (a tile's path and what it was checked against), or
            ``None``; it then starts the message.
    """

    def __init__(self, expected: bytes, calculated: bytes, where: str | None = None) -> None:
        prefix = f"{where}: " if where else ""
        super().__init__(
            f"{prefix}root mismatch: expected {expected.hex()}, calculated {calculated.hex()}"
        )
        self.expected = expected
        self.calculated = calculated
        self.where = where


class ProofLengthError(ProofError):
    """A proof has more or fewer hashes than the index and sizes require."""


class HashLengthError(ProofError):
    """A leaf, proof or root hash is not exactly 32 bytes."""


class IndexOutOfRangeError(ProofError):
    """An index or tree size is outside its domain (``index >= size``, ``size1 > size2``, ...)."""


class CheckpointError(ProofError):
    """A checkpoint or signed note is malformed, unsigned by a known key, or rolls back."""


class TileError(ProofError):
    """A tile or entry bundle of a tiled log (C2SP tlog-tiles) is malformed, cannot be fetched,
    or would overwrite an immutable tile with other bytes. A tile whose hashes do not lead to
    the checkpoint's root raises ``RootMismatchError`` instead.

    Attributes:
        path: the tile's path below the log's prefix (``tile/0/x001/234``), or ``None``.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class TileNotFoundError(TileError, LookupError):
    """A tile, bundle or checkpoint the log should serve is not there (HTTP 404, no file)."""


# --- ledger --------------------------------------------------------------------------------


class LedgerError(MerkleMemoryError):
    """Base class of ledger failures."""


class LedgerBrokenError(LedgerError):
    """The chain is broken, so the operation (adopting, proving) is refused.

    Attributes:
        report: the verify report that found the break (a ``VerifyReport``), or ``None``.
    """

    def __init__(self, message: str, report: Any = None) -> None:
        super().__init__(message)
        self.report = report


class LedgerRollbackError(LedgerError):
    """The ledger file went backwards (truncated, emptied, or restored from an older copy).

    Attributes:
        expected_seq: the last 1-based seq known to have been written (from ``ledger.head``
            or this process's memory).
        found_seq: the last seq the file holds now (0 for an empty file).
    """

    def __init__(self, message: str, expected_seq: int = 0, found_seq: int = 0) -> None:
        super().__init__(message)
        self.expected_seq = expected_seq
        self.found_seq = found_seq


class LedgerFormatError(LedgerError, ValueError):
    """A ledger line or head file that cannot be read as an entry."""


class RecordError(LedgerError, ValueError):
    """A memory record that cannot be read or sealed (bad id, not a JSON object, ...)."""


class StoreFileError(LedgerError):
    """A file of a ledger's store (``ledger.jsonl``, ``ledger.head``, ``ledger.torn``,
    ``ledger.tree``, ``ledger.tree.state``, ``ledger.ids``) or a tenant under ``ROOT/agents/``
    is a symbolic link, a FIFO, a device or a folder: it is never followed, never opened in a
    way that could block, and never read or written.

    Attributes:
        path: the file as a ``str``.
        reason: what it is (e.g. ``"a symbolic link (never followed)"``).
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class TenantError(LedgerError):
    """A folder that is not a tenant, so ``Tenant.verify`` / ``seal`` refuse it: no folder at
    the path, neither ``memory/`` nor ``ledger.jsonl``, a ``memory`` that is not a folder, or
    a ``memory/`` that is a symbolic link (never followed). Also a tenant a write cannot go
    through (e.g. ``Tenant.save`` finding ``memory/<id>.json.pending`` a folder).

    Attributes:
        reason: what is wrong, without the path (e.g. ``"not a tenant folder (no memory/ and
            no ledger.jsonl)"``).
        path: the tenant folder as given (a ``str``), or ``None``.
    """

    def __init__(self, reason: str, path: str | None = None) -> None:
        super().__init__(reason if path is None else f"{path}: {reason}")
        self.reason = reason
        self.path = path


class TreeLogError(LedgerError):
    """The Merkle tree sidecar of a ledger disagrees with the ledger, or cannot be read.

    Attributes:
        leaf_index: 0-based index of the first leaf found wrong, or ``None``.
    """

    def __init__(self, message: str, leaf_index: int | None = None) -> None:
        super().__init__(message)
        self.leaf_index = leaf_index


# --- conversation DAG ----------------------------------------------------------------------


class DagError(MerkleMemoryError, ValueError):
    """Base class of conversation-DAG model errors (DESIGN section 3), and raised itself when a
    node cannot join an in-memory ``Dag``/``Forest``: ``None``, an unknown parent, or a second
    root of a single-rooted ``Dag`` (tapes ``Dag.AddNode``); also for ``node_hash`` of a value
    that is not a ``Bucket``.

    Attributes:
        node_hash: the id of the node refused (64-char hex), or ``None``.
    """

    def __init__(self, message: str, node_hash: str | None = None) -> None:
        super().__init__(message)
        self.node_hash = node_hash


class ContentBlockError(DagError):
    """A malformed ``ContentBlock``: an empty or non-string ``type``, a field of the wrong type,
    an unknown field in ``ContentBlock.from_dict``, or a value with no JSON meaning inside it
    (NaN, a set, a lone surrogate, nesting deeper than ``canonical.MAX_DEPTH - 4`` levels, ...).

    Importers re-raise it as :class:`TranscriptFormatError` (same text) for the source that
    held the block.
    """


class NodeFormatError(DagError):
    """A malformed ``Bucket`` or ``Node``: an empty or non-string bucket ``type``/``role``,
    content that is not a sequence of ``ContentBlock``, a hash or parent hash that is not
    64-char lowercase hex, metadata that is not a JSON object, or a missing or unknown key in
    ``Bucket.from_dict``/``Node.from_dict``.

    Importers re-raise it as :class:`TranscriptFormatError` (same text).
    """


class TranscriptFormatError(MerkleMemoryError, ValueError):
    """A transcript or request body that no importer can read.

    Attributes:
        path: the file being read, as given (``str``), or ``None`` for an in-memory value or
            when the error is not about one file.
        line: the 1-based line number of the offending line of a line-based file (JSONL) or
            of a JSON syntax error, or ``None``.
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line


# --- node stores ---------------------------------------------------------------------------


class NodeStoreError(MerkleMemoryError):
    """A node store is inconsistent (a dangling parent, a cycle) or cannot be opened."""


class NodeNotFoundError(NodeStoreError, LookupError):
    """No node is stored under the hash asked for (``ancestry``, ``load_dag``, ``dag show``).

    Attributes:
        node_hash: the hash asked for.
    """

    def __init__(self, message: str, node_hash: str | None = None) -> None:
        super().__init__(message)
        self.node_hash = node_hash


# --- database backends ---------------------------------------------------------------------


class DatabaseError(MerkleMemoryError):
    """A database backend (PostgreSQL) cannot be used: its driver is not installed (the extra
    ``postgres``), the server cannot be reached, or it refused a statement.

    Attributes:
        url: the database URL with any password removed, or ``None``.
        sqlstate: the five-character SQLSTATE the server gave, or ``None``.
    """

    def __init__(self, message: str, url: str | None = None, sqlstate: str | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.sqlstate = sqlstate


# --- memory bank ---------------------------------------------------------------------------


class BankError(MerkleMemoryError):
    """Base class of memory-bank failures (unknown id, unsafe path, refused write)."""


class MemoryFormatError(BankError, ValueError):
    """A memory whose fields are invalid (a non-slug type, a naive timestamp, ...)."""


class MemoryNotFoundError(BankError, LookupError):
    """No memory file in the bank (active or archived) carries the id asked for.

    Attributes:
        memory_id: the id asked for (64-char lowercase hex).
    """

    def __init__(self, message: str, memory_id: str | None = None) -> None:
        super().__init__(message)
        self.memory_id = memory_id


class TamperedMemoryError(BankError):
    """A memory file does not verify: unparseable, not a memory, or content, id and file name
    disagree. The file is left as it is (evidence); ``bank verify`` names every such file.

    Attributes:
        path: the offending file, relative to the bank (``memories/...``), or ``None``.
    """

    def __init__(self, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


# --- witnesses (C2SP tlog-witness) ---------------------------------------------------------


class WitnessError(MerkleMemoryError):
    """A witness refused a checkpoint, or could not be reached.

    Attributes:
        status: the HTTP status the witness answered (404 unknown log, 403 no valid log
            signature, 400 bad request, 409 conflict, 422 bad consistency proof), or ``None``
            when there was no answer.
        size: for a 409 with ``Content-Type: text/x.tlog.size``, the tree size the witness
            last cosigned; else ``None``.
    """

    def __init__(self, message: str, status: int | None = None, size: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.size = size
