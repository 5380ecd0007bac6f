"""Witness policies: "at least K of these N witnesses" cosigned a checkpoint (checkpoint module)."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from merkle_memory import rfc6962
from merkle_memory.checkpoint import (
    Checkpoint,
    CheckpointClient,
    Cosignature,
    WitnessPolicy,
    add_cosignatures,
    open_checkpoint,
    open_cosigned_checkpoint,
    sign_checkpoint,
)
from merkle_memory.errors import CheckpointError
from merkle_memory.proof import consistency_proof
from merkle_memory.signed_note import CosignatureSigner, HmacKey, parse_note, sign_note

pytest.importorskip("cryptography", reason="Ed25519 needs the optional extra 'ed25519'")

LEAVES = [rfc6962.hash_leaf(b"%d" % i) for i in range(20)]
LOG = HmacKey("log.example/a", bytes(range(32)))
WITNESSES = [CosignatureSigner(f"w{i}.example", bytes([i + 1]) * 32, 1000 + i) for i in range(4)]
TRUSTED = tuple(w.verifier() for w in WITNESSES[:3])  # w3 is not trusted


def _cosigned(size: int, *cosigners: CosignatureSigner, leaves: list[bytes] = LEAVES) -> str:
    cp = Checkpoint("log.example/a", size, rfc6962.root(leaves[:size]))
    note = sign_checkpoint(cp, [LOG])
    for w in cosigners:
        lines = sign_note(cp.to_text(), [w]).split("\n\n", 1)[1]
        note = add_cosignatures(note, lines)
    return note


def test_quorum_counts_distinct_trusted_witnesses() -> None:
    """Two trusted cosignatures meet a quorum of 2; an untrusted witness and a repeated line do
    not count; the cosignatures come back with their timestamps."""
    policy = WitnessPolicy(TRUSTED, 2)
    note = _cosigned(5, WITNESSES[0], WITNESSES[3], WITNESSES[2])
    cp, cosigs = open_cosigned_checkpoint(note, [LOG], policy, "log.example/a")
    assert cp.size == 5
    assert cosigs == (
        Cosignature("w0.example", TRUSTED[0].key_id, 1000),
        Cosignature("w2.example", TRUSTED[2].key_id, 1002),
    )
    doubled = add_cosignatures(
        _cosigned(5, WITNESSES[0]), _cosigned(5, WITNESSES[0]).split("\n\n")[1]
    )
    assert doubled == _cosigned(5, WITNESSES[0])  # the same line is kept once
    repeated = doubled + doubled.split("\n\n")[1].splitlines()[1] + "\n"
    with pytest.raises(CheckpointError, match="cosigned by 1 of the trusted witnesses"):
        open_checkpoint(repeated, [LOG], policy=policy)
    with pytest.raises(CheckpointError, match="the policy needs 2"):
        open_checkpoint(_cosigned(5, WITNESSES[1], WITNESSES[3]), [LOG], policy=policy)
    assert open_checkpoint(_cosigned(5), [LOG], policy=WitnessPolicy(TRUSTED, 0)).size == 5


def test_a_bad_cosignature_by_a_trusted_witness_rejects_the_checkpoint() -> None:
    """A trusted witness's cosignature over another tree, pasted on, rejects the whole note."""
    good = _cosigned(5, WITNESSES[0], WITNESSES[1])
    other = _cosigned(6, WITNESSES[2])
    forged = add_cosignatures(good, other.split("\n\n")[1].splitlines()[1] + "\n")
    with pytest.raises(CheckpointError, match="invalid signature"):
        open_checkpoint(forged, [LOG], policy=WitnessPolicy(TRUSTED, 2))


def test_witnesses_alone_are_not_the_log() -> None:
    """Cosignatures without the log's own signature are refused, whatever their number."""
    cp = Checkpoint("log.example/a", 5, rfc6962.root(LEAVES[:5]))
    note = sign_note(cp.to_text(), list(WITNESSES[:3]))
    with pytest.raises(CheckpointError, match="no valid signature by the log"):
        open_cosigned_checkpoint(note, [LOG], WitnessPolicy(TRUSTED, 3))


def test_policy_is_validated() -> None:
    """A quorum above the witness count, a negative one, a non-cosigner key and a repeated
    witness are refused."""
    with pytest.raises(CheckpointError):
        WitnessPolicy(TRUSTED, 4)
    with pytest.raises(CheckpointError):
        WitnessPolicy(TRUSTED, -1)
    with pytest.raises(CheckpointError):
        WitnessPolicy((LOG,), 1)  # type: ignore[arg-type]
    with pytest.raises(CheckpointError):
        WitnessPolicy((TRUSTED[0], TRUSTED[0]), 1)


def test_client_with_a_policy_needs_the_quorum_at_every_step(tmp_path: Path) -> None:
    """A client holding a policy refuses an extension lacking cosignatures and accepts one that
    has them with a consistency proof."""
    client = CheckpointClient(
        tmp_path / "state.note", [LOG], "log.example/a", policy=WitnessPolicy(TRUSTED, 2)
    )
    assert client.update(_cosigned(5, WITNESSES[0], WITNESSES[1])).size == 5
    with pytest.raises(CheckpointError):
        client.update(_cosigned(9, WITNESSES[0]), consistency_proof(5, 9, LEAVES))
    accepted = client.update(
        _cosigned(9, WITNESSES[1], WITNESSES[2]), consistency_proof(5, 9, LEAVES)
    )
    assert accepted.size == 9 and client.latest == accepted


def test_add_cosignatures_refuses_garbage() -> None:
    """add_cosignatures needs well-formed signature lines."""
    note = _cosigned(3)
    with pytest.raises(CheckpointError):
        add_cosignatures(note, "not a signature line\n")
    line = "\u2014 w.example " + base64.b64encode(bytes(76)).decode() + "\n"
    merged = add_cosignatures(note, line)
    assert parse_note(merged).signatures[-1].name == "w.example"
