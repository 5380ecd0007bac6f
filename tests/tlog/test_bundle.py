"""Offline proof bundles, c2sp.org/tlog-proof@v1 (tlog.bundle, tlog.publish)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from support import asset_path

from merkle_memory import rfc6962
from merkle_memory.checkpoint import Checkpoint, WitnessPolicy, sign_checkpoint
from merkle_memory.errors import (
    CheckpointError,
    LedgerError,
    ProofError,
    ProofLengthError,
    RootMismatchError,
)
from merkle_memory.ledger import Ledger
from merkle_memory.proof import inclusion_proof
from merkle_memory.signed_note import HmacKey, sign_note
from merkle_memory.tlog import (
    ProofBundle,
    Witness,
    WitnessServer,
    ledger_bundle,
    verify_ledger_bundle,
    witness_ledger,
)

KEY = HmacKey("example.com/agents", bytes(range(32)))
ORIGIN = "example.com/agents/cc"
LEAVES = [rfc6962.hash_leaf(b"leaf %d" % i) for i in range(13)]


def _examples() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(asset_path("tlog_upstream", "c2sp_examples.json").read_text())
    return data


def _bundle(index: int = 6, size: int = 13, extra: bytes | None = b"leaf 6") -> ProofBundle:
    note = sign_checkpoint(Checkpoint(ORIGIN, size, rfc6962.root(LEAVES[:size])), [KEY])
    return ProofBundle(index, tuple(inclusion_proof(index, size, LEAVES)), note, extra)


def test_text_form_round_trips_and_verifies() -> None:
    """to_text writes the header, extra, index, proof lines, a blank line and the note; it
    parses back equal and verifies with the log's key (the leaf hash from the extra data)."""
    bundle = _bundle()
    text = bundle.to_text()
    lines = text.split("\n")
    assert lines[:3] == [
        "c2sp.org/tlog-proof@v1",
        "extra " + base64.b64encode(b"leaf 6").decode(),
        "index 6",
    ]
    assert lines[3 : 3 + len(bundle.proof)] == [base64.b64encode(h).decode() for h in bundle.proof]
    assert text.endswith("\n\n" + bundle.checkpoint)
    assert ProofBundle.from_text(text) == bundle == ProofBundle.from_text(text.encode())
    assert bundle.verify([KEY], origin=ORIGIN).size == 13
    no_extra = _bundle(extra=None)
    assert "extra" not in no_extra.to_text()
    assert no_extra.verify([KEY], leaf_hash=LEAVES[6]).size == 13
    with pytest.raises(ProofError, match="no extra data"):
        no_extra.verify([KEY])


def test_the_spec_example_parses() -> None:
    """The tlog-proof example of the spec (extra, index 73894, five hashes, a checkpoint)
    parses; its proof is illustrative (17 hashes are needed at that size), so it fails by
    length."""
    head = _examples()["tlog_proof_head"]
    signed = sign_note(head.split("\n\n", 1)[1], [KEY])
    bundle = ProofBundle.from_text(head.split("\n\n", 1)[0] + "\n\n" + signed)
    assert bundle.index == 73894 and len(bundle.proof) == 5
    assert bundle.extra is not None and bundle.extra.startswith(b"age-v1.2.1-darwin-arm64.tar.gz")
    with pytest.raises(ProofLengthError, match="expected 17"):
        bundle.verify([KEY])


def test_tampering_is_refused() -> None:
    """Another leaf, index, proof hash, root or signature fails verification."""
    bundle = _bundle()
    with pytest.raises(RootMismatchError):
        ProofBundle(bundle.index, bundle.proof, bundle.checkpoint, b"leaf 7").verify([KEY])
    with pytest.raises(RootMismatchError):
        ProofBundle(7, bundle.proof, bundle.checkpoint, b"leaf 7").verify([KEY])
    bad = (bytes(32), *bundle.proof[1:])
    with pytest.raises(RootMismatchError):
        ProofBundle(6, bad, bundle.checkpoint, b"leaf 6").verify([KEY])
    other = sign_checkpoint(Checkpoint(ORIGIN, 13, rfc6962.root([*LEAVES[:12], LEAVES[0]])), [KEY])
    with pytest.raises(RootMismatchError):
        ProofBundle(6, bundle.proof, other, b"leaf 6").verify([KEY])
    with pytest.raises(CheckpointError):
        bundle.verify([HmacKey("example.com/agents", bytes(32))])
    with pytest.raises(CheckpointError):
        bundle.verify([KEY], origin="other.example/log")


def test_strict_parsing() -> None:
    """A wrong header, index with leading zero, missing index, short or non-canonical base64,
    more than 64 proof lines, no blank line or invalid UTF-8 are refused."""
    good = _bundle().to_text()
    head, note = good.split("\n\n", 1)
    lines = head.split("\n")
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    loose = lines[3][:42] + alphabet[alphabet.index(lines[3][42]) | 1] + "="  # stray low bits
    variants = [
        good.replace("c2sp.org/tlog-proof@v1", "c2sp.org/tlog-proof@v2", 1),
        good.replace("index 6", "index 06", 1),
        good.replace("index 6\n", "", 1),
        "\n".join([*lines[:3], "AAAA", *lines[4:]]) + "\n\n" + note,
        "\n".join([*lines[:3], loose, *lines[4:]]) + "\n\n" + note,
        "\n".join([*lines[:3], *([lines[3]] * 65)]) + "\n\n" + note,
        head,
        "\n".join([lines[0], "extra !!", *lines[2:]]) + "\n\n" + note,
    ]
    for text in variants:
        with pytest.raises(ProofError):
            ProofBundle.from_text(text)
    with pytest.raises(ProofError):
        ProofBundle.from_text(b"\xff" + good.encode())
    with pytest.raises(CheckpointError):
        ProofBundle.from_text(head + "\n\nnot a note\n")
    with pytest.raises(ProofError):
        ProofBundle(-1, (), note)


def _tenant(tmp_path: Path) -> Path:
    tenant = tmp_path / "cc"
    tenant.mkdir()
    ledger = Ledger(tenant / "ledger.jsonl")
    ledger.append_many([(f"note-{i}", f"{i:064x}") for i in range(9)], ts=1_700_000_000.0)
    return tenant


def test_ledger_bundle_round_trip(tmp_path: Path) -> None:
    """A ledger's bundle carries the entry line as extra data; it verifies offline, with the
    entry's seq and memory id checked; another memory id or a non-canonical entry fails."""
    tenant = _tenant(tmp_path)
    bundle = ledger_bundle(tenant, "note-3", ORIGIN, [KEY])
    assert bundle.index == 3 and bundle.extra is not None
    checkpoint, entry = verify_ledger_bundle(
        ProofBundle.from_text(bundle.to_text()), [KEY], origin=ORIGIN, memory_id="note-3"
    )
    assert (checkpoint.size, entry.seq, entry.memory_id) == (9, 4, "note-3")
    with pytest.raises(ProofError, match="note-3"):
        verify_ledger_bundle(bundle, [KEY], memory_id="note-4")
    spaced = bundle.extra.replace(b'","', b'", "', 1)
    with pytest.raises(ProofError):
        verify_ledger_bundle(ProofBundle(3, bundle.proof, bundle.checkpoint, spaced), [KEY])
    with pytest.raises(ProofError, match="seq"):
        verify_ledger_bundle(ProofBundle(4, bundle.proof, bundle.checkpoint, bundle.extra), [KEY])
    with pytest.raises(LedgerError):
        ledger_bundle(tenant, "no-such-id", ORIGIN, [KEY])


def test_ledger_bundle_carries_the_cosigned_checkpoint(tmp_path: Path) -> None:
    """After `witness_ledger`, a bundle uses the cosigned checkpoint kept beside the ledger
    (its size, even once the ledger grew), so it meets a 1-of-1 witness policy offline."""
    pytest.importorskip("cryptography", reason="cosignatures need the optional extra 'ed25519'")
    from merkle_memory.signed_note import CosignatureSigner

    tenant = _tenant(tmp_path)
    w1 = CosignatureSigner("witness.example/w1", bytes(range(5, 37)))
    witness = Witness(tmp_path / "w.db", w1, {ORIGIN: [KEY]})
    with WitnessServer(witness) as server:
        witness_ledger(tenant, ORIGIN, [KEY], server.url, witness_keys=[w1.verifier()])
    Ledger(tenant / "ledger.jsonl").append("late", "f" * 64)
    policy = WitnessPolicy((w1.verifier(),), 1)
    bundle = ledger_bundle(tenant, "note-8", ORIGIN, [KEY])
    checkpoint, entry = verify_ledger_bundle(bundle, [KEY], origin=ORIGIN, policy=policy)
    assert (checkpoint.size, entry.seq) == (9, 9)
    late = ledger_bundle(tenant, "late", ORIGIN, [KEY])  # not covered: a fresh checkpoint
    assert late.verify([KEY]).size == 10
    with pytest.raises(CheckpointError, match="cosigned by 0"):
        late.verify([KEY], policy=policy)
