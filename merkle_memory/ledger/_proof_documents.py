"""Proof documents: the JSON that ``ledger prove`` / ``ledger consistency`` print (private).

Re-exported from ``ledger_proofs``. Hashes are 32-byte ``bytes`` inside and 64-char lowercase
hex in the JSON form (DESIGN §7 keys).

An inclusion proof document also carries ``entry``: the proven ledger entry as a JSON object
(its seven keys). Its RFC 8785 form (``canonical.dumps(entry)``, i.e. ``Entry.line()``, the
ledger line without its newline for lines this library wrote) is the leaf data, so a verifier
recomputes ``leaf_hash = SHA-256(0x00 || that)`` and checks that the entry's ``memory_id`` and
``seq`` (= ``leaf_index + 1``) are the ones the document claims: the id and the position are
authenticated by the root, not taken on the document's word. ``tree_size`` is authenticated
only by a root whose size the verifier knows (a signed checkpoint, or a pinned size).
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from ..errors import MerkleMemoryError, ProofError
from ..proof import verify_consistency, verify_inclusion
from ..rfc6962 import hash_leaf
from ._entry import Entry

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
        entry: the ledger entry proven; ``entry.line()`` is the leaf data (JSON key
            ``entry``: the entry object with its seven keys).
    """

    memory_id: str
    leaf_index: int
    tree_size: int
    leaf_hash: bytes
    root_hash: bytes
    inclusion_proof: tuple[bytes, ...]
    entry: Entry

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form: the DESIGN §7 keys (hashes as 64-char lowercase hex), then
        ``entry`` (the entry object)."""
        return {
            "memory_id": self.memory_id,
            "leaf_index": self.leaf_index,
            "tree_size": self.tree_size,
            "leaf_hash": self.leaf_hash.hex(),
            "root_hash": self.root_hash.hex(),
            "inclusion_proof": [h.hex() for h in self.inclusion_proof],
            "entry": self.entry.to_dict(),
        }

    @classmethod
    def from_dict(cls, value: Any) -> InclusionProof:
        """Parse the JSON form.

        Raises:
            ProofError: not an object, a missing key (``entry`` included: documents without
                it cannot bind the id and position), a bad value, or an ``entry`` that is not
                a well-formed ledger entry (its own ``hash`` is not checked: the leaf hash
                covers every byte of it).
        """
        if not isinstance(value, dict):
            raise ProofError("not an inclusion proof document: not a JSON object")
        try:
            return cls(
                _str(value["memory_id"]),
                _int(value["leaf_index"]),
                _int(value["tree_size"]),
                _hex(value["leaf_hash"]),
                _hex(value["root_hash"]),
                tuple(_hex(h) for h in _list(value["inclusion_proof"])),
                _entry(value["entry"]),
            )
        except KeyError as exc:
            raise ProofError(f"not an inclusion proof document: missing {exc}") from exc

    def check_entry(self) -> None:
        """Check that ``entry`` is what the other fields claim: ``leaf_hash`` is the RFC 6962
        leaf hash of ``entry.line()``, ``entry.memory_id == memory_id`` and ``entry.seq ==
        leaf_index + 1``.

        Raises:
            ProofError: any of the three differs, or the entry has no RFC 8785 form.
        """
        try:
            data = self.entry.line()
        except MerkleMemoryError as exc:
            raise ProofError(f"the entry has no canonical form: {exc}") from exc
        if not hmac.compare_digest(hash_leaf(data), self.leaf_hash):
            raise ProofError("leaf_hash is not the leaf hash of the entry")
        if self.entry.memory_id != self.memory_id:
            raise ProofError(
                f"the entry seals memory id {self.entry.memory_id!r}, not {self.memory_id!r}"
            )
        if self.entry.seq != self.leaf_index + 1:
            raise ProofError(
                f"the entry has seq {self.entry.seq}, not leaf_index + 1 = {self.leaf_index + 1}"
            )

    def verify(self, root: bytes) -> None:
        """``check_entry``, then ``verify_inclusion`` against the trusted 32-byte ``root``.

        ``tree_size`` is taken from the document: ``root`` must be trusted *for that size*
        (a checkpoint of that size), else only "in the tree with this root" is proven.

        Raises:
            ProofError: the entry does not match, or the proof does not verify
                (``RootMismatchError`` and the other ``ProofError`` subclasses).
        """
        self.check_entry()
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
        if not isinstance(value, dict):
            raise ProofError("not a consistency proof document: not a JSON object")
        try:
            return cls(
                _int(value["old_size"]),
                _int(value["new_size"]),
                _hex(value["old_root"]),
                _hex(value["new_root"]),
                tuple(_hex(h) for h in _list(value["consistency_proof"])),
            )
        except KeyError as exc:
            raise ProofError(f"not a consistency proof document: missing {exc}") from exc

    def verify(self) -> None:
        """``verify_consistency`` between ``old_root`` and ``new_root`` (raises ``ProofError``)."""
        verify_consistency(
            self.old_size, self.new_size, self.consistency_proof, self.old_root, self.new_root
        )


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise ProofError(f"expected a string, got {str(value)[:80]!r}")
    return value


def _entry(value: Any) -> Entry:
    try:
        return Entry.from_dict(value, check_hash=False)
    except MerkleMemoryError as exc:
        raise ProofError(f"entry is not a ledger entry: {exc}") from exc


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
