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

Witnesses (c2sp.org/tlog-cosignature, tlog-witness): a ``WitnessPolicy`` names the witnesses a
client trusts (their ``cosignature/v1`` verifier keys, type 0x04) and how many of them must have
cosigned, "at least K of these N". ``open_checkpoint(..., policy=...)`` then needs the log's own
signature *and* K valid cosignatures from distinct witnesses: a log that shows one history to
some and another to others must get K witnesses to cosign both, and an honest witness cosigns
only a tree consistent with every tree it cosigned before.
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
from .signed_note import (
    CosignatureSigner,
    CosignatureVerifier,
    Note,
    Signer,
    Verifier,
    cosignature_timestamp,
    open_note,
    parse_note,
    sign_note,
)

__all__ = [
    "Checkpoint",
    "CheckpointClient",
    "Cosignature",
    "WitnessPolicy",
    "add_cosignatures",
    "open_checkpoint",
    "open_cosigned_checkpoint",
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
        CheckpointError: ``checkpoint`` is not a ``Checkpoint``, no signer, something that is
            not a signer, a witness's cosigner key (``CosignatureSigner``, type 0x04: it
            cosigns, it does not sign a log's checkpoints), or an invalid key name.
    """
    if not isinstance(checkpoint, Checkpoint):
        raise CheckpointError(f"checkpoint must be a Checkpoint, not {type(checkpoint).__name__}")
    if not isinstance(signers, str | bytes) and isinstance(signers, Sequence):
        for signer in signers:
            if isinstance(signer, CosignatureSigner):
                raise CheckpointError(
                    f"key {signer.name!r} is a witness's cosigner key (type 0x04), "
                    "not a log's key: it cannot sign a checkpoint"
                )
    return sign_note(checkpoint.to_text(), signers)


def _log_verifiers(verifiers: Sequence[Verifier]) -> tuple[Verifier, ...]:
    """The log's keys; a witness's cosigner key (type 0x04) among them is refused."""
    if isinstance(verifiers, str | bytes) or not isinstance(verifiers, Sequence):
        raise CheckpointError(
            f"the log's keys are a sequence of verifiers, not {type(verifiers).__name__}"
        )
    for verifier in verifiers:
        if isinstance(verifier, CosignatureVerifier):
            raise CheckpointError(
                f"key {verifier.name!r} is a witness's cosigner key (type 0x04), not a log's "
                "key (witness keys go in a WitnessPolicy)"
            )
    return tuple(verifiers)


@dataclass(frozen=True, slots=True)
class Cosignature:
    """One verified witness cosignature of a checkpoint.

    Attributes:
        witness: the witness's key name.
        key_id: its uint32 key ID (type 0x04).
        timestamp: when it cosigned, POSIX seconds.
    """

    witness: str
    key_id: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class WitnessPolicy:
    """ "At least ``quorum`` of these ``witnesses``": what a client asks of a checkpoint.

    Attributes:
        witnesses: the trusted witnesses' verifiers (``CosignatureVerifier``, type 0x04), each
            a distinct (name, key ID).
        quorum: how many distinct witnesses must have cosigned, ``0 <= quorum <=
            len(witnesses)`` (0: the log's signature alone suffices).
    """

    witnesses: tuple[CosignatureVerifier, ...]
    quorum: int

    def __post_init__(self) -> None:
        """Validate the policy.

        Raises:
            CheckpointError: a witness that is not a ``CosignatureVerifier``, two witnesses with
                the same name and key ID, or a quorum outside ``0..len(witnesses)``.
        """
        witnesses = tuple(self.witnesses)
        if not all(isinstance(w, CosignatureVerifier) for w in witnesses):
            raise CheckpointError("a witness policy takes cosignature (type 0x04) verifier keys")
        ids = {(w.name, w.key_id) for w in witnesses}
        if len(ids) != len(witnesses):
            raise CheckpointError("a witness policy names the same witness key twice")
        if (
            not isinstance(self.quorum, int)
            or isinstance(self.quorum, bool)
            or not 0 <= self.quorum <= len(witnesses)
        ):
            raise CheckpointError(
                f"quorum {self.quorum!r} is not in 0..{len(witnesses)} (the witnesses given)"
            )
        object.__setattr__(self, "witnesses", witnesses)

    def cosignatures(self, note: Note) -> tuple[Cosignature, ...]:
        """The cosignatures of ``note`` (opened with these witnesses among its verifiers) by
        this policy's witnesses, one per witness."""
        mine = {(w.name, w.key_id) for w in self.witnesses}
        out: list[Cosignature] = []
        for sig in note.verified:
            if (sig.name, sig.key_id) in mine and all(c.witness != sig.name for c in out):
                out.append(Cosignature(sig.name, sig.key_id, cosignature_timestamp(sig.signature)))
        return tuple(out)


def open_checkpoint(
    note: str | bytes,
    verifiers: Sequence[Verifier],
    origin: str | None = None,
    *,
    policy: WitnessPolicy | None = None,
) -> Checkpoint:
    """Verify a signed checkpoint note and parse its body.

    Args:
        note: the signed note.
        verifiers: the log's known keys; at least one of them must have signed.
        origin: when given, the checkpoint's origin must be exactly this.
        policy: when given, also the witness quorum (see ``open_cosigned_checkpoint``).

    Raises:
        CheckpointError: a witness's cosigner key (type 0x04) among ``verifiers``, bad
            signature, no known signature, malformed body, wrong origin, or
            fewer valid cosignatures than the policy's quorum.
    """
    if policy is None:
        checkpoint = Checkpoint.from_text(open_note(note, _log_verifiers(verifiers)).text)
        if origin is not None and checkpoint.origin != origin:
            raise CheckpointError(f"checkpoint origin {checkpoint.origin!r} is not {origin!r}")
        return checkpoint
    return open_cosigned_checkpoint(note, verifiers, policy, origin)[0]


def open_cosigned_checkpoint(
    note: str | bytes,
    verifiers: Sequence[Verifier],
    policy: WitnessPolicy,
    origin: str | None = None,
) -> tuple[Checkpoint, tuple[Cosignature, ...]]:
    """Verify a checkpoint signed by the log and cosigned by at least ``policy.quorum`` of the
    policy's witnesses (c2sp.org/tlog-cosignature).

    Every signature line from a known key (log or witness) must verify (a bad one rejects the
    whole note); lines from unknown keys are ignored.

    Args:
        note: the signed note (the log's signature line and cosignature lines).
        verifiers: the log's keys; at least one must have signed.
        policy: the trusted witnesses and the quorum.
        origin: when given, the checkpoint's origin must be exactly this.

    Returns:
        The checkpoint and the valid cosignatures by the policy's witnesses (one per witness,
        in note order).

    Raises:
        CheckpointError: a witness's cosigner key (type 0x04) among ``verifiers``, malformed
            note or body, a bad signature, no valid log signature, a
            wrong origin, or fewer distinct witnesses than the quorum.
    """
    logs = _log_verifiers(verifiers)
    if not isinstance(policy, WitnessPolicy):
        raise CheckpointError(f"policy must be a WitnessPolicy, not {type(policy).__name__}")
    opened = open_note(note, [*logs, *policy.witnesses])
    log_ids = {(v.name, v.key_id) for v in logs}
    if not any((sig.name, sig.key_id) in log_ids for sig in opened.verified):
        raise CheckpointError("checkpoint carries no valid signature by the log's key")
    checkpoint = Checkpoint.from_text(opened.text)
    if origin is not None and checkpoint.origin != origin:
        raise CheckpointError(f"checkpoint origin {checkpoint.origin!r} is not {origin!r}")
    cosignatures = policy.cosignatures(opened)
    if len(cosignatures) < policy.quorum:
        raise CheckpointError(
            f"checkpoint is cosigned by {len(cosignatures)} of the trusted witnesses, "
            f"the policy needs {policy.quorum}"
        )
    return checkpoint, cosignatures


def add_cosignatures(note: str, cosignature_lines: str) -> str:
    """Return ``note`` with the signature lines of ``cosignature_lines`` appended, skipping
    lines (same name, key ID and signature bytes) it already holds.

    Raises:
        CheckpointError: a malformed note or a malformed signature line.
    """
    parsed = parse_note(note)
    extra = parse_note(parsed.text + "\n" + cosignature_lines)
    lines = list(parsed.signatures)
    for sig in extra.signatures:
        if sig not in lines:
            lines.append(sig)
    return Note(parsed.text, tuple(lines)).signed()


class CheckpointClient:
    """Keeps the last verified checkpoint of one log in a file; refuses rollbacks and forks.

    The first checkpoint seen is trusted on first use (as is any when the stored one has size
    0: every tree extends the empty tree, and DESIGN §6 makes a consistency proof from size 0
    always fail, so none is asked for).
    """

    def __init__(
        self,
        state_path: str | os.PathLike[str],
        verifiers: Sequence[Verifier],
        origin: str,
        *,
        policy: WitnessPolicy | None = None,
    ) -> None:
        """Create a client.

        Args:
            state_path: file holding the last verified signed note (created on first update).
            verifiers: keys the log's checkpoints must be signed with (at least one).
            origin: the log's origin line; checkpoints of other logs are refused.
            policy: when given, every checkpoint accepted must also meet this witness quorum.
        """
        self._path = Path(state_path)
        self._verifiers = tuple(verifiers)
        self._origin = origin
        self._policy = policy

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
        return open_checkpoint(note, self._verifiers, self._origin, policy=self._policy)

    def update(self, note: str | bytes, consistency_proof: Sequence[bytes] = ()) -> Checkpoint:
        """Verify a newer signed checkpoint and, if it extends the stored one, store it.

        Args:
            note: the new signed checkpoint.
            consistency_proof: RFC 6962 proof from the stored size to the new size (32-byte
                hashes); empty for the first checkpoint or an identical one.

        Returns:
            The checkpoint now trusted.

        Raises:
            CheckpointError: bad signature or origin, too few cosignatures for the policy; a
                rollback (smaller size than stored); a fork (same size, different root).
            ProofError: the consistency proof does not verify (a fork), e.g.
                ``RootMismatchError`` or ``ProofLengthError``.
        """
        new = open_checkpoint(note, self._verifiers, self._origin, policy=self._policy)
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
