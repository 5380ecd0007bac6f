"""A ledger made checkable by third parties: its tiles, its witnesses, its proof bundles.

Each function takes a ledger (a ``Ledger``, a ``LedgerStore``, its ``ledger.jsonl`` or the
tenant folder) and works through the ledger's public API only: ``ledger.proofs.tree_head`` and
``prove_inclusion`` (which sync the Merkle sidecar and check it against the ledger first), the
store's sidecar for hashes, and ``Ledger.entries`` for the leaf data (``Entry.line()``, the
entry's RFC 8785 line). What the sidecar serves is never trusted on its own: tiles are checked
against the checkpoint's root before the checkpoint is published, bundle proofs are verified
against the checkpoint they carry.

Files kept beside the ledger (tenant folder):

* ``ledger.cosigned``: the latest checkpoint the log signed and witnesses cosigned (a signed
  note: the log's signature line, then the cosignature lines), replaced atomically;
* ``ledger.witnesses``: JSON ``{"<witness URL>": <tree size it last cosigned>}``, what the
  client believes each witness holds (a hint: a 409 answer corrects it).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

from .. import _pg, canonical
from ..checkpoint import Checkpoint, WitnessPolicy, add_cosignatures, sign_checkpoint
from ..errors import (
    CheckpointError,
    IndexOutOfRangeError,
    LedgerError,
    MerkleMemoryError,
    ProofError,
    WitnessError,
)
from ..ledger import Entry, FolderLedgerStore, Ledger, LedgerStore, PostgresLedgerStore
from ..ledger import proofs as ledger_proofs
from ..ledger.treelog import node_count, node_position
from ..proof import LeafSource, SubtreeSource, inclusion_proof, verify_inclusion
from ..rfc6962 import HASH_SIZE, hash_children, hash_leaf
from ..signed_note import CosignatureVerifier, Signer, Verifier, open_note, parse_note
from .bundle import ProofBundle
from .s3 import S3Tiles, is_s3_url
from .tiles import TileSink, TileWriteReport, write_tiles
from .witness import WitnessClient

__all__ = [
    "COSIGNED_NAME",
    "WITNESS_STATE_NAME",
    "LedgerLike",
    "ledger_bundle",
    "publish_tiles",
    "verify_ledger_bundle",
    "witness_ledger",
]

log = logging.getLogger(__name__)

COSIGNED_NAME = "ledger.cosigned"
"""File name, beside ``ledger.jsonl``, of the latest cosigned checkpoint (a database tenant:
its ``mm_ledger_files`` row of that name)."""

WITNESS_STATE_NAME = "ledger.witnesses"
"""File name, beside ``ledger.jsonl``, of the sizes each witness was last seen to hold (a
database tenant: its ``mm_ledger_files`` row of that name)."""

LedgerLike = Ledger | LedgerStore | str | os.PathLike[str]
"""A ``Ledger``, a ``LedgerStore``, a ``ledger.jsonl`` path, the tenant folder holding it, or
a ``postgresql://...#tenant`` URL."""


def _ledger(ledger: LedgerLike) -> Ledger:
    if isinstance(ledger, Ledger):
        return ledger
    if isinstance(ledger, LedgerStore):
        return Ledger(ledger)
    if _pg.is_url(ledger):
        return Ledger(PostgresLedgerStore.existing(str(ledger)))
    path = Path(ledger)
    if path.is_dir():
        path = path / "ledger.jsonl"
    if not path.is_file():
        raise LedgerError(f"{path}: no ledger file")
    return Ledger(FolderLedgerStore(path))


class _Lines:
    """Leaf data of a ledger by index, read in order (``write_tiles`` asks in order, but for
    re-created bundles first: asked for earlier entries, the ledger is read again)."""

    def __init__(self, led: Ledger) -> None:
        self._led = led
        self._entries: Iterator[Entry] = led.entries()
        self._next = 0

    def __call__(self, start: int, end: int) -> list[bytes]:
        if start < self._next:
            self._entries, self._next = self._led.entries(), 0
        out: list[bytes] = []
        for entry in self._entries:
            index = self._next
            self._next += 1
            if index >= start:
                out.append(entry.line())
            if self._next >= end:
                break
        return out


class _Levels:
    """Every perfect-subtree root of a list of leaf hashes, level by level, in memory: a
    ``proof.SubtreeSource`` for a ledger whose sidecar serves no ``perfect_root`` (a database
    table, read one row a hash) or could not be written (a read-only reader). 64 bytes a leaf."""

    def __init__(self, leaves: list[bytes]) -> None:
        self._levels = [leaves]
        layer = leaves
        while len(layer) > 1:
            layer = [hash_children(layer[j], layer[j + 1]) for j in range(0, len(layer) - 1, 2)]
            self._levels.append(layer)

    def __len__(self) -> int:
        return len(self._levels[0])

    def __getitem__(self, index: int, /) -> bytes:
        return self._levels[0][index]

    def perfect_root(self, level: int, index: int) -> bytes:
        if not 0 <= level < len(self._levels) or not 0 <= index < len(self._levels[level]):
            raise IndexOutOfRangeError(f"perfect subtree ({level}, {index}) is not complete")
        return self._levels[level][index]


@runtime_checkable
class _BulkNodes(Protocol):
    """A sidecar that reads a range of its post-order node hashes at once (a database table)."""

    def __len__(self) -> int: ...

    def nodes(self, first: int, stop: int) -> bytes: ...


class _PostOrder:
    """The first ``size`` leaves' node hashes in ``treelog`` post-order, in memory: a
    ``proof.SubtreeSource`` read from a ``_BulkNodes`` sidecar in one query."""

    def __init__(self, blob: bytes, size: int) -> None:
        self._blob = blob
        self._size = size

    def __len__(self) -> int:
        return self._size

    def __getitem__(self, index: int, /) -> bytes:
        return self.perfect_root(0, index)

    def perfect_root(self, level: int, index: int) -> bytes:
        if level < 0 or index < 0 or (index + 1) << level > self._size:
            raise IndexOutOfRangeError(f"perfect subtree ({level}, {index}) is not complete")
        position = node_position(level, index) * HASH_SIZE
        return self._blob[position : position + HASH_SIZE]


def _source(led: Ledger, size: int) -> LeafSource:
    sidecar = led.store.sidecar()
    if isinstance(sidecar, SubtreeSource) and len(sidecar) >= size:
        return sidecar
    if isinstance(sidecar, _BulkNodes) and len(sidecar) >= size:
        blob = sidecar.nodes(0, node_count(size))
        if len(blob) == node_count(size) * HASH_SIZE:
            return _PostOrder(blob, size)
    # hash the leaves in memory (every tile is checked against the signed root before the
    # checkpoint is published, whatever served the hashes)
    leaves = [hash_leaf(entry.line()) for _, entry in zip(range(size), led.entries(), strict=False)]
    return _Levels(leaves)


def publish_tiles(
    ledger: LedgerLike,
    folder: str | os.PathLike[str] | TileSink,
    origin: str,
    signers: Sequence[Signer],
    *,
    entries: bool = True,
) -> TileWriteReport:
    """Publish the ledger's current tree as C2SP tiles (and entry bundles) under ``folder``,
    with its checkpoint signed by ``signers``; incremental (see ``tiles.write_tiles``).

    Every tile and bundle is stored (fsynced, or its PUT acknowledged) before the checkpoint
    that covers them, and nothing relies on a conditional write: the ledger is the only
    sequencer, and a re-run after a crash stores the same immutable bytes again.

    Args:
        ledger: the ledger (see ``LedgerLike``); a ``postgresql://...#tenant`` URL too.
        folder: the tiles' root folder (``checkpoint`` and ``tile/`` go in), a
            ``TileSink`` (``S3Tiles`` for object storage), or an ``s3://bucket/prefix`` URL
            (an ``S3Tiles`` with boto3's default endpoint, region and credentials).
        origin: the checkpoint's origin line.
        signers: the log's signing keys (at least one).
        entries: also write the entry bundles (``tile/entries/...``: the ledger lines).

    Raises:
        LedgerBrokenError: the chain is broken (no checkpoint is signed for it).
        TileError: the folder holds another log's tiles or a larger checkpoint, a
            published checkpoint whose signature by one of ``signers`` does not verify, a
            damaged tile or bundle (named), or an entry is longer than 65,535 bytes.
        CheckpointError: a bad origin or no signer.
        RootMismatchError: the tiles would not lead to the checkpoint's root.
        LedgerRollbackError: the ledger lost entries its head records (nothing is signed).
        LedgerError: a ``postgresql://`` URL naming no tenant.
        DatabaseError: the database cannot be reached, or psycopg is not installed.
        OSError: from the file system.

    A ``TileError`` is also raised when the object store fails, or boto3 (the extra ``s3``)
    is not installed for an ``s3://`` URL.
    """
    target: str | os.PathLike[str] | TileSink = folder
    if is_s3_url(folder):
        target = S3Tiles(str(folder))
    led = _ledger(ledger)
    checkpoint = ledger_proofs.tree_head(led, origin)
    note = sign_checkpoint(checkpoint, signers)
    reader: Callable[[int, int], Sequence[bytes]] | None = _Lines(led) if entries else None
    verifiers: list[Verifier] = []
    for signer in signers:
        make = getattr(signer, "verifier", None)
        if callable(make):
            verifiers.append(make())
    return write_tiles(target, note, _source(led, checkpoint.size), reader, verifiers=verifiers)


def _read_state(store: LedgerStore) -> dict[str, int]:
    """``ledger.witnesses`` as ``{url: size}`` (empty when missing or unreadable)."""
    data = store.read_side_file(WITNESS_STATE_NAME)
    if data is None:
        return {}
    try:
        value = json.loads(data)
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(v, int) and not isinstance(v, bool)}


def _stored_cosigned(store: LedgerStore) -> str | None:
    """``ledger.cosigned`` as text, or ``None`` when missing (or not UTF-8: replaced)."""
    data = store.read_side_file(COSIGNED_NAME)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def witness_ledger(
    ledger: LedgerLike,
    origin: str,
    signers: Sequence[Signer],
    url: str,
    *,
    witness_keys: Sequence[CosignatureVerifier] = (),
    timeout: float = 30.0,
) -> str:
    """Submit the ledger's signed checkpoint to a witness (C2SP tlog-witness) and keep the
    cosigned checkpoint beside the ledger (``ledger.cosigned``; a database tenant: its
    ``mm_ledger_files`` row, the same bytes); return it.

    The old size sent is the one the witness was last seen to hold (``ledger.witnesses``, 0 the
    first time); when the witness answers 409 with the size it holds, the request is made once
    more from that size, with the consistency proof from it. Cosignatures already kept for the
    same checkpoint are kept (several witnesses, one after the other).

    Args:
        ledger: the ledger (see ``LedgerLike``): a folder's or a ``postgresql://...#tenant``
            URL's (``ledger.cosigned`` and ``ledger.witnesses`` are kept with
            ``LedgerStore.write_side_file``, each atomically).
        origin: the checkpoint's origin line.
        signers: the log's signing keys.
        url: the witness's submission prefix (``http://127.0.0.1:8080``).
        witness_keys: when given, the answer's cosignatures must verify with one of these keys
            (else ``WitnessError``); without, they are kept unchecked.
        timeout: seconds to wait for the witness.

    Returns:
        The cosigned checkpoint note (also written to ``ledger.cosigned``).

    Raises:
        WitnessError: the witness refused (its ``status``), is unreachable, holds a larger tree
            than the ledger (a rollback) or the same size with another root (a fork), or its
            answer does not verify with ``witness_keys``.
        LedgerBrokenError: the chain is broken.
        CheckpointError: a bad origin or no signer.
        LedgerError: the ledger's store keeps no files beside the ledger.
        DatabaseError: the database refused or cannot be reached.
        OSError: from the file system.
    """
    led = _ledger(ledger)
    store = led.store
    state = _read_state(store)
    checkpoint = ledger_proofs.tree_head(led, origin)
    note = sign_checkpoint(checkpoint, signers)
    client = WitnessClient(url, timeout=timeout)
    old = min(state.get(url, 0), checkpoint.size)
    for attempt in range(2):
        proof = _consistency(led, old, checkpoint)
        try:
            lines = client.add_checkpoint(note, old, proof)
            break
        except WitnessError as exc:
            if exc.status != 409 or exc.size is None or attempt:
                raise
            if exc.size > checkpoint.size:
                raise WitnessError(
                    f"the witness holds a tree of size {exc.size}, larger than the ledger's "
                    f"{checkpoint.size}: the ledger was rolled back or forked",
                    status=409,
                    size=exc.size,
                ) from exc
            if exc.size == old:
                raise  # same size, another root: a fork the witness refuses to cosign
            old = exc.size
    else:  # pragma: no cover - the loop breaks or raises
        raise AssertionError
    if witness_keys:
        _check_cosignatures(checkpoint, lines, witness_keys)
    state[url] = checkpoint.size
    kept = _stored_cosigned(store)
    merged = note
    if kept is not None:
        try:
            if parse_note(kept).text == checkpoint.to_text():
                merged = kept
        except CheckpointError:
            pass  # a damaged file is replaced
    merged = add_cosignatures(add_cosignatures(merged, _log_lines(note)), lines)
    store.write_side_file(COSIGNED_NAME, merged.encode())
    store.write_side_file(WITNESS_STATE_NAME, (json.dumps(state, sort_keys=True) + "\n").encode())
    return merged


def _log_lines(note: str) -> str:
    return "".join(sig.line() + "\n" for sig in parse_note(note).signatures)


def _consistency(led: Ledger, old: int, checkpoint: Checkpoint) -> list[bytes]:
    if old in (0, checkpoint.size):
        return []
    proof = ledger_proofs.prove_consistency(led, old)
    if proof.new_size != checkpoint.size or proof.new_root != checkpoint.root:
        raise LedgerError("the ledger grew while a witness was asked: try again")
    return list(proof.consistency_proof)


def _check_cosignatures(checkpoint: Checkpoint, lines: str, keys: Sequence[Verifier]) -> None:
    """The witness's answer must hold a valid cosignature by one of ``keys`` (and no bad one)."""
    try:
        open_note(checkpoint.to_text() + "\n" + lines, list(keys))
    except CheckpointError as exc:
        raise WitnessError(f"the witness's answer does not verify with its key: {exc}") from exc


def ledger_bundle(
    ledger: LedgerLike,
    memory_id: str,
    origin: str,
    signers: Sequence[Signer],
) -> ProofBundle:
    """Return an offline proof bundle (c2sp.org/tlog-proof@v1) for the latest entry of
    ``memory_id``: its index, its inclusion proof, and a checkpoint; the entry's line rides in
    the ``extra`` field, so the bundle alone proves the entry.

    The checkpoint is the cosigned one kept beside the ledger (``ledger.cosigned``, see
    ``witness_ledger``) when it covers the entry and is this ledger's (its root is the root of
    that many entries), so the bundle carries the witnesses' cosignatures; otherwise a fresh one
    of the current tree, signed by ``signers`` (with a warning on the ``merkle_memory.tlog``
    logger when ``ledger.cosigned`` covers the entry but holds another history: a rollback or
    a fork since it was cosigned).

    Raises:
        LedgerError: no entry seals ``memory_id``.
        LedgerBrokenError: the chain is broken.
        CheckpointError: a bad origin or no signer.
        ProofError: the proof does not verify against the checkpoint (a damaged sidecar or a
            ``ledger.cosigned`` of another history).
    """
    led = _ledger(ledger)
    proven = ledger_proofs.prove_inclusion(led, memory_id)
    index = proven.leaf_index
    leaf = proven.entry.line()
    note: str | None = None
    proof: list[bytes] = list(proven.inclusion_proof)
    cosigned = _stored_cosigned(led.store)
    if cosigned is not None:
        try:
            held = Checkpoint.from_text(parse_note(cosigned).text)
        except CheckpointError:
            held = None
        if held is not None and held.origin == origin and index < held.size <= proven.tree_size:
            try:
                candidate = inclusion_proof(index, held.size, led.store.sidecar())
                verify_inclusion(hash_leaf(leaf), index, held.size, candidate, held.root)
            except ProofError:
                # Another history at that size (a rollback or a fork since the witnesses
                # cosigned it), or a damaged sidecar: evidence the caller must see, never
                # dropped in silence. The bundle gets a fresh checkpoint.
                log.warning(
                    "%s: %s (tree size %d) does not hold entry %d of this ledger as it is"
                    " now: the witnessed history differs from this ledger's (a rollback or a"
                    " fork since it was cosigned, or a damaged sidecar); the bundle carries a"
                    " fresh checkpoint that no witness cosigned",
                    led.store.label,
                    COSIGNED_NAME,
                    held.size,
                    index + 1,
                )
            else:
                note, proof = cosigned, candidate
    if note is None:
        checkpoint = Checkpoint(origin, proven.tree_size, proven.root_hash)
        note = sign_checkpoint(checkpoint, signers)
    bundle = ProofBundle(index, tuple(proof), note, leaf)
    bundle.check_proof(hash_leaf(leaf))
    return bundle


def verify_ledger_bundle(
    bundle: ProofBundle | str | bytes,
    verifiers: Sequence[Verifier],
    *,
    origin: str | None = None,
    policy: WitnessPolicy | None = None,
    memory_id: str | None = None,
) -> tuple[Checkpoint, Entry]:
    """Verify a ledger's proof bundle offline: the checkpoint (and witness quorum), the
    inclusion of the entry carried in ``extra``, and that this entry is the one at ``index``
    (its seq is ``index + 1``) sealing ``memory_id`` when that is given.

    Args:
        bundle: the bundle, or its text (parsed with ``ProofBundle.from_text``).
        verifiers: the log's verifier keys.
        origin: when given, the checkpoint's origin must be this.
        policy: when given, the witness quorum the checkpoint must meet.
        memory_id: when given, the memory id the entry must seal.

    Returns:
        The verified checkpoint and the proven entry.

    Raises:
        CheckpointError: a bad signature, origin, or quorum; bad ``verifiers``.
        ProofError: ``bundle`` is neither a ``ProofBundle`` nor a bundle's text, no entry in
            ``extra``, an entry that is not this library's canonical ledger line, a seq or
            memory id that differs, or a proof that does not verify.
    """
    if isinstance(bundle, str | bytes):
        bundle = ProofBundle.from_text(bundle)
    if not isinstance(bundle, ProofBundle):
        raise ProofError(f"bundle must be a ProofBundle or its text, not {type(bundle).__name__}")
    if bundle.extra is None:
        raise ProofError("the bundle carries no ledger entry (no 'extra' line)")
    try:
        value = canonical.loads(bundle.extra)
        entry = Entry.from_dict(value, check_hash=True)
        canonical_line = entry.line()
    except MerkleMemoryError as exc:
        raise ProofError(f"the bundle's extra data is not a ledger entry: {exc}") from exc
    if canonical_line != bundle.extra:
        raise ProofError("the bundle's entry is not in its canonical (RFC 8785) form")
    if entry.seq != bundle.index + 1:
        raise ProofError(f"the entry has seq {entry.seq}, the bundle index {bundle.index}")
    if memory_id is not None and entry.memory_id != memory_id:
        raise ProofError(f"the entry seals memory id {entry.memory_id!r}, not {memory_id!r}")
    checkpoint = bundle.verify(verifiers, origin=origin, policy=policy)
    return checkpoint, entry
