"""Signed tree heads in the C2SP tlog-checkpoint format, and a client that keeps the last one.

A checkpoint body (c2sp.org/tlog-checkpoint) is::

    <origin>\\n
    <tree size, decimal, no leading zeros>\\n
    <base64 of the 32-byte RFC 6962 root>\\n
    [extension lines\\n ...]

and it travels as a signed note (``signed_note``). ``CheckpointClient`` keeps the last
verified checkpoint in a file and accepts a newer one only with a valid consistency proof
(DESIGN §6): a smaller size is a rollback, the same size with another root or a failing
consistency proof is a fork; both raise and leave the stored state as it was.

The stored state is the signed note itself, written atomically (temp file, fsync, rename,
fsync folder) and verified again with the client's keys whenever it is loaded, so a tampered
state file is refused rather than trusted.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ._fsio import atomic_write
from .errors import CheckpointError, HashLengthError
from .proof import verify_consistency
from .rfc6962 import HASH_SIZE, check_hash
from .signed_note import Signer, Verifier, open_note, sign_note

__all__ = [
    "Checkpoint",
    "CheckpointClient",
    "open_checkpoint",
    "sign_checkpoint",
]

_SIZE = re.compile(r"(?:0|[1-9][0-9]{0,18})\Z")
_MAX_SIZE = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A tree head: origin, size and root (C2SP tlog-checkpoint).

    Attributes:
        origin: the log's unique name, e.g. ``example.com/agents/rocky`` (no newline).
        size: tree size in leaves (= ledger entries), ``0 <= size < 2**63``.
        root: the 32-byte RFC 6962 root of that tree.
        extensions: optional extra lines (NOT RECOMMENDED by the spec), each non-empty.
    """

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Validate every field.

        Raises:
            CheckpointError: empty origin, a control character, a size outside
                ``0..2**63-1``, a root that is not 32 bytes, or an empty extension line.
        """
        for line in (self.origin, *self.extensions):
            if not isinstance(line, str) or not line or any(ord(c) < 0x20 for c in line):
                raise CheckpointError(f"checkpoint line {line!r} is empty or has a control char")
        if (
            not isinstance(self.size, int)
            or isinstance(self.size, bool)
            or not 0 <= self.size <= _MAX_SIZE
        ):
            raise CheckpointError(f"checkpoint size {self.size!r} is not in 0..2**63-1")
        try:
            root = check_hash(self.root, "checkpoint root")
        except HashLengthError as exc:
            raise CheckpointError(str(exc)) from None
        object.__setattr__(self, "root", root)  # a bytes-like root is kept as bytes

    def to_text(self) -> str:
        """Return the checkpoint body (the note text), ending in a newline."""
        root = base64.b64encode(self.root).decode()
        lines = [self.origin, str(self.size), root, *self.extensions]
        return "".join(line + "\n" for line in lines)

    @classmethod
    def from_text(cls, text: str) -> Checkpoint:
        """Parse a checkpoint body strictly.

        Raises:
            CheckpointError: fewer than three lines, no final newline, a size with a sign,
                leading zeros or other characters, or a root that is not canonical base64 of
                32 bytes.
        """
        if not isinstance(text, str) or not text.endswith("\n"):
            raise CheckpointError("checkpoint text must end in a newline")
        lines = text[:-1].split("\n")
        if len(lines) < 3:
            raise CheckpointError("checkpoint needs origin, size and root lines")
        origin, size_text, root_text, *extensions = lines
        if not _SIZE.match(size_text):
            raise CheckpointError(f"checkpoint size {size_text[:40]!r} is not a decimal size")
        try:
            root = base64.b64decode(root_text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise CheckpointError("checkpoint root is not base64") from exc
        if len(root) != HASH_SIZE or base64.b64encode(root).decode() != root_text:
            raise CheckpointError("checkpoint root is not the base64 of 32 bytes")
        return cls(origin, int(size_text), root, tuple(extensions))


def sign_checkpoint(checkpoint: Checkpoint, signers: Sequence[Signer]) -> str:
    """Return ``checkpoint`` as a signed note signed by ``signers``.

    Raises:
        CheckpointError: ``checkpoint`` is not a ``Checkpoint``, no signer, or an invalid key
            name.
    """
    if not isinstance(checkpoint, Checkpoint):
        raise CheckpointError(f"checkpoint must be a Checkpoint, not {type(checkpoint).__name__}")
    return sign_note(checkpoint.to_text(), signers)


def open_checkpoint(
    note: str | bytes, verifiers: Sequence[Verifier], origin: str | None = None
) -> Checkpoint:
    """Verify a signed checkpoint note and parse its body.

    Args:
        note: the signed note.
        verifiers: the known keys; at least one of them must have signed.
        origin: when given, the checkpoint's origin must be exactly this.

    Raises:
        CheckpointError: bad signature, no known signature, malformed body, wrong origin.
    """
    checkpoint = Checkpoint.from_text(open_note(note, verifiers).text)
    if origin is not None and checkpoint.origin != origin:
        raise CheckpointError(f"checkpoint origin {checkpoint.origin!r} is not {origin!r}")
    return checkpoint


class CheckpointClient:
    """Keeps the last verified checkpoint of one log in a file; refuses rollbacks and forks.

    The first checkpoint seen is trusted on first use (as is any when the stored one has size
    0: every tree extends the empty tree, and DESIGN §6 makes a consistency proof from size 0
    always fail, so none is asked for).
    """

    def __init__(
        self, state_path: str | os.PathLike[str], verifiers: Sequence[Verifier], origin: str
    ) -> None:
        """Create a client.

        Args:
            state_path: file holding the last verified signed note (created on first update).
            verifiers: keys the log's checkpoints must be signed with (at least one).
            origin: the log's origin line; checkpoints of other logs are refused.
        """
        self._path = Path(state_path)
        self._verifiers = tuple(verifiers)
        self._origin = origin

    @property
    def latest(self) -> Checkpoint | None:
        """The last verified checkpoint, or ``None`` before the first update.

        Raises:
            CheckpointError: the state file no longer verifies with the client's keys.
        """
        try:
            note = self._path.read_bytes()
        except FileNotFoundError:
            return None
        return open_checkpoint(note, self._verifiers, self._origin)

    def update(self, note: str | bytes, consistency_proof: Sequence[bytes] = ()) -> Checkpoint:
        """Verify a newer signed checkpoint and, if it extends the stored one, store it.

        Args:
            note: the new signed checkpoint.
            consistency_proof: RFC 6962 proof from the stored size to the new size (32-byte
                hashes); empty for the first checkpoint or an identical one.

        Returns:
            The checkpoint now trusted.

        Raises:
            CheckpointError: bad signature or origin; a rollback (smaller size than stored);
                a fork (same size, different root).
            ProofError: the consistency proof does not verify (a fork), e.g.
                ``RootMismatchError`` or ``ProofLengthError``.
        """
        new = open_checkpoint(note, self._verifiers, self._origin)
        old = self.latest
        if old is not None and old.size > 0:
            if new.size < old.size:
                raise CheckpointError(
                    f"rollback: checkpoint size {new.size} is below the trusted size {old.size}"
                )
            if new.size == old.size:
                if not hmac.compare_digest(new.root, old.root):
                    raise CheckpointError(f"fork: two different roots for tree size {new.size}")
                return old
            verify_consistency(old.size, new.size, consistency_proof, old.root, new.root)
        text = note if isinstance(note, bytes) else note.encode("utf-8")
        atomic_write(self._path, text)
        return new
