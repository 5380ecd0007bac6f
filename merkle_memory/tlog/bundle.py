"""Offline proof bundles: c2sp.org/tlog-proof@v1.

One file (extension ``.tlog-proof``) proves that an entry is in a log, checkable offline
against the log's key and, optionally, a witness policy::

    c2sp.org/tlog-proof@v1
    extra <base64 of opaque extra data>        (optional line)
    index <0-based leaf index, decimal>
    <base64 proof hash, leaf sibling first>    (zero or more lines)
    <empty line>
    <the signed checkpoint, verbatim>

Parsing is strict: exact header, decimal numbers without leading zeros, canonical base64,
32-byte hashes, at most 64 of them, LF line ends, UTF-8. The ``extra`` data is not
authenticated by the format: bundles of a ledger (``publish.ledger_bundle``) carry the entry's
line there, and it is authenticated because its leaf hash must be the one the proof proves.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..checkpoint import Checkpoint, WitnessPolicy, open_checkpoint
from ..errors import CheckpointError, ProofError
from ..proof import verify_inclusion
from ..rfc6962 import HASH_SIZE, check_hash, hash_leaf
from ..signed_note import Verifier, parse_note

__all__ = [
    "BUNDLE_HEADER",
    "MAX_PROOF_HASHES",
    "ProofBundle",
]

BUNDLE_HEADER = "c2sp.org/tlog-proof@v1"
"""The first line of a proof bundle."""

MAX_PROOF_HASHES = 64
"""Most proof lines a bundle may hold (a tree of up to 2**64 leaves)."""

_DECIMAL = re.compile(r"(?:0|[1-9][0-9]{0,19})\Z")


def _b64(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ProofError(f"{what} is not base64") from exc
    if base64.b64encode(raw).decode() != text:
        raise ProofError(f"{what} is not canonical base64")
    return raw


@dataclass(frozen=True, slots=True)
class ProofBundle:
    """A c2sp.org/tlog-proof@v1 bundle.

    Attributes:
        index: the entry's 0-based leaf index.
        proof: the inclusion proof in the checkpoint's tree, 32-byte hashes, leaf sibling first.
        checkpoint: the signed checkpoint note, verbatim (log signature, maybe cosignatures).
        extra: the optional opaque extra data (``None``: no ``extra`` line).
    """

    index: int
    proof: tuple[bytes, ...]
    checkpoint: str
    extra: bytes | None = None

    def __post_init__(self) -> None:
        """Validate the fields.

        Raises:
            ProofError: a negative or non-int index, too many or wrong-length hashes, or
                extra data that is not bytes.
            CheckpointError: a checkpoint that is not a signed note.
        """
        if not isinstance(self.index, int) or isinstance(self.index, bool) or self.index < 0:
            raise ProofError(f"bundle index {self.index!r} is not an int >= 0")
        proof = tuple(check_hash(h, f"proof hash {i}") for i, h in enumerate(self.proof))
        if len(proof) > MAX_PROOF_HASHES:
            raise ProofError(f"a bundle holds at most {MAX_PROOF_HASHES} proof hashes")
        object.__setattr__(self, "proof", proof)
        if self.extra is not None:
            if not isinstance(self.extra, bytes | bytearray | memoryview):
                raise ProofError("bundle extra data must be bytes")
            object.__setattr__(self, "extra", bytes(self.extra))
        if not isinstance(self.checkpoint, str):
            raise CheckpointError("a bundle's checkpoint is the signed note's text")
        parse_note(self.checkpoint)

    def to_text(self) -> str:
        """Return the bundle's text (UTF-8 when written to a file)."""
        lines = [BUNDLE_HEADER]
        if self.extra is not None:
            lines.append("extra " + base64.b64encode(self.extra).decode())
        lines.append(f"index {self.index}")
        lines.extend(base64.b64encode(h).decode() for h in self.proof)
        return "\n".join(lines) + "\n\n" + self.checkpoint

    @classmethod
    def from_text(cls, text: str | bytes) -> ProofBundle:
        """Parse a bundle strictly.

        Raises:
            ProofError: not UTF-8, a wrong header, a malformed extra, index or proof line,
                more than 64 proof lines, or no empty line before the checkpoint.
            CheckpointError: the checkpoint part is not a signed note.
        """
        if isinstance(text, bytes):
            try:
                text = text.decode("utf-8", "strict")
            except UnicodeDecodeError as exc:
                raise ProofError("proof bundle is not UTF-8") from exc
        if not isinstance(text, str):
            raise ProofError("a proof bundle is text")
        head, sep, note = text.partition("\n\n")
        if not sep:
            raise ProofError("proof bundle has no empty line before its checkpoint")
        lines = head.split("\n")
        if lines[0] != BUNDLE_HEADER:
            raise ProofError(f"not a proof bundle: the first line is not {BUNDLE_HEADER!r}")
        position = 1
        extra: bytes | None = None
        if position < len(lines) and lines[position].startswith("extra "):
            extra = _b64(lines[position][len("extra ") :], "bundle extra data")
            position += 1
        if position >= len(lines) or not lines[position].startswith("index "):
            raise ProofError("proof bundle has no 'index N' line")
        number = lines[position][len("index ") :]
        if not _DECIMAL.match(number) or int(number) >= 2**63:
            raise ProofError(f"bundle index {number[:40]!r} is not a decimal index")
        proof_lines = lines[position + 1 :]
        if len(proof_lines) > MAX_PROOF_HASHES:
            raise ProofError(f"a bundle holds at most {MAX_PROOF_HASHES} proof hashes")
        proof = []
        for i, line in enumerate(proof_lines):
            raw = _b64(line, f"proof line {i + 1}")
            if len(raw) != HASH_SIZE:
                raise ProofError(f"proof line {i + 1} is not a 32-byte hash")
            proof.append(raw)
        try:
            return cls(int(number), tuple(proof), note, extra)
        except CheckpointError as exc:
            raise CheckpointError(f"the proof bundle's checkpoint: {exc}") from exc

    def check_proof(self, leaf_hash: bytes) -> Checkpoint:
        """Check the proof against the carried checkpoint's root, *without* its signature
        (for a producer checking what it wrote); ``verify`` is what a verifier calls.

        Raises:
            ProofError: the proof does not lead to the root (``RootMismatchError``), or has
                the wrong length for the index and the tree size.
            CheckpointError: the checkpoint's body is malformed.
        """
        checkpoint = Checkpoint.from_text(parse_note(self.checkpoint).text)
        verify_inclusion(leaf_hash, self.index, checkpoint.size, self.proof, checkpoint.root)
        return checkpoint

    def verify(
        self,
        verifiers: Sequence[Verifier],
        *,
        leaf_hash: bytes | None = None,
        origin: str | None = None,
        policy: WitnessPolicy | None = None,
    ) -> Checkpoint:
        """Verify the bundle offline: the checkpoint's signature (and witness quorum), then the
        inclusion proof of the leaf at ``index`` against its root.

        Args:
            verifiers: the log's verifier keys.
            leaf_hash: the 32-byte leaf hash proven; default: ``hash_leaf(extra)`` (the
                extra data is the leaf data, as in this library's ledger bundles).
            origin: when given, the checkpoint's origin must be this.
            policy: when given, the witnesses' quorum the checkpoint must meet.

        Returns:
            The verified checkpoint.

        Raises:
            CheckpointError: a bad or missing signature, a wrong origin, too few cosignatures.
            ProofError: no leaf hash and no extra data, or the proof does not verify
                (``RootMismatchError``, ``ProofLengthError``, ``IndexOutOfRangeError``).
        """
        if leaf_hash is None:
            if self.extra is None:
                raise ProofError("the bundle has no extra data: give the leaf hash to check")
            leaf_hash = hash_leaf(self.extra)
        checkpoint = open_checkpoint(self.checkpoint, verifiers, origin, policy=policy)
        verify_inclusion(leaf_hash, self.index, checkpoint.size, self.proof, checkpoint.root)
        return checkpoint
