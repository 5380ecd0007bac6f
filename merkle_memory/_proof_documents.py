"""Proof documents: the JSON that ``ledger prove`` / ``ledger consistency`` print (private).

Re-exported from ``ledger_proofs``. Hashes are 32-byte ``bytes`` inside and 64-char lowercase
hex in the JSON form (DESIGN §7 keys).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .errors import ProofError
from .proof import verify_consistency, verify_inclusion

__all__ = ["ConsistencyProof", "InclusionProof"]


@dataclass(frozen=True, slots=True)
class InclusionProof:
    """An inclusion proof of one ledger entry (JSON keys of ``ledger prove``, DESIGN §7).

    Attributes:
        memory_id: the record id.
        leaf_index: 0-based leaf index (= seq - 1).
        tree_size: tree size in leaves the proof is for.
        leaf_hash: 32-byte RFC 6962 leaf hash of the entry line.
        root_hash: 32-byte root of the tree of ``tree_size`` leaves.
        inclusion_proof: the audit path, 32-byte hashes, leaf sibling first.
    """

    memory_id: str
    leaf_index: int
    tree_size: int
    leaf_hash: bytes
    root_hash: bytes
    inclusion_proof: tuple[bytes, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (hashes as 64-char lowercase hex)."""
        return {
            "memory_id": self.memory_id,
            "leaf_index": self.leaf_index,
            "tree_size": self.tree_size,
            "leaf_hash": self.leaf_hash.hex(),
            "root_hash": self.root_hash.hex(),
            "inclusion_proof": [h.hex() for h in self.inclusion_proof],
        }

    @classmethod
    def from_dict(cls, value: Any) -> InclusionProof:
        """Parse the JSON form. Raises ``ProofError`` for a missing key or a bad value."""
        try:
            return cls(
                str(value["memory_id"]),
                _int(value["leaf_index"]),
                _int(value["tree_size"]),
                _hex(value["leaf_hash"]),
                _hex(value["root_hash"]),
                tuple(_hex(h) for h in _list(value["inclusion_proof"])),
            )
        except (KeyError, TypeError) as exc:
            raise ProofError(f"not an inclusion proof document: missing {exc}") from exc

    def verify(self, root: bytes) -> None:
        """``verify_inclusion`` against the trusted 32-byte ``root`` (raises ``ProofError``)."""
        verify_inclusion(
            self.leaf_hash, self.leaf_index, self.tree_size, self.inclusion_proof, root
        )


@dataclass(frozen=True, slots=True)
class ConsistencyProof:
    """A consistency proof between two ledger sizes (JSON keys of ``ledger consistency``).

    Attributes:
        old_size: the older tree size in leaves.
        new_size: the newer tree size.
        old_root: 32-byte root of the older tree.
        new_root: 32-byte root of the newer tree.
        consistency_proof: 32-byte hashes.
    """

    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    consistency_proof: tuple[bytes, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form (hashes as 64-char lowercase hex)."""
        return {
            "old_size": self.old_size,
            "new_size": self.new_size,
            "old_root": self.old_root.hex(),
            "new_root": self.new_root.hex(),
            "consistency_proof": [h.hex() for h in self.consistency_proof],
        }

    @classmethod
    def from_dict(cls, value: Any) -> ConsistencyProof:
        """Parse the JSON form. Raises ``ProofError`` for a missing key or a bad value."""
        try:
            return cls(
                _int(value["old_size"]),
                _int(value["new_size"]),
                _hex(value["old_root"]),
                _hex(value["new_root"]),
                tuple(_hex(h) for h in _list(value["consistency_proof"])),
            )
        except (KeyError, TypeError) as exc:
            raise ProofError(f"not a consistency proof document: missing {exc}") from exc

    def verify(self) -> None:
        """``verify_consistency`` between ``old_root`` and ``new_root`` (raises ``ProofError``)."""
        verify_consistency(
            self.old_size, self.new_size, self.consistency_proof, self.old_root, self.new_root
        )


def _int(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProofError(f"expected an integer, got {value!r}")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ProofError("expected a list of hex hashes")
    return value


def _hex(value: Any) -> bytes:
    if not isinstance(value, str) or len(value) != 64:
        raise ProofError(f"expected a 64-char hex hash, got {str(value)[:80]!r}")
    try:
        return bytes.fromhex(value)
    except ValueError as exc:
        raise ProofError(f"not hex: {value[:80]!r}") from exc
