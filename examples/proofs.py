"""Proofs and checkpoints in five steps: build a tree, prove, sign, verify, catch a fork.

Runs in well under a second in a temporary folder; also works pasted into a notebook cell.
Look at: the inclusion proof length (about log2 of the tree size), the consistency proof,
the signed checkpoint note, and the two refusals at the end.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

try:
    import merkle_memory  # noqa: F401
except ImportError:  # running from a checkout without installing it
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from merkle_memory import rfc6962
from merkle_memory.checkpoint import Checkpoint, CheckpointClient, sign_checkpoint
from merkle_memory.errors import CheckpointError, ProofError
from merkle_memory.ledger import Ledger
from merkle_memory.ledger.proofs import prove_consistency, prove_inclusion, tree_head
from merkle_memory.proof import verify_consistency, verify_inclusion
from merkle_memory.signed_note import HmacKey, generate_hmac_key, signer_from_key


def demo(folder: Path) -> None:
    """Run the walk-through in ``folder`` (a tenant directory is created inside)."""
    # 1. A plain tree over leaf hashes, in memory.
    leaves = [rfc6962.hash_leaf(f"memory {i}".encode()) for i in range(1000)]
    root = rfc6962.root(leaves)
    print(f"tree of {len(leaves)} leaves, root {root.hex()[:16]}...")

    # 2. A ledger of 100 sealed records; proofs come from its sidecar file ledger.tree.
    tenant = folder / "rocky"
    ledger = Ledger(tenant / "ledger.jsonl")
    ledger.append_many((f"mem-{i}", f"{i:064x}") for i in range(60))
    old = tree_head(tenant, "example.com/rocky")
    ledger.append_many((f"mem-{i}", f"{i:064x}") for i in range(60, 100))
    proof = prove_inclusion(tenant, "mem-42")
    verify_inclusion(
        proof.leaf_hash, proof.leaf_index, proof.tree_size, proof.inclusion_proof, proof.root_hash
    )
    print(
        f"mem-42 is leaf {proof.leaf_index} of {proof.tree_size}: "
        f"{len(proof.inclusion_proof)} hashes prove it"
    )
    growth = prove_consistency(tenant, old.size)
    verify_consistency(
        growth.old_size, growth.new_size, growth.consistency_proof, old.root, growth.new_root
    )
    print(
        f"size {growth.new_size} extends size {growth.old_size}: "
        f"{len(growth.consistency_proof)} hashes prove it"
    )

    # 3. Signed checkpoints: HMAC is built in (not publicly verifiable) ...
    key = signer_from_key(generate_hmac_key("example.com/rocky"))
    assert isinstance(key, HmacKey)
    client = CheckpointClient(folder / "trusted.note", [key], "example.com/rocky")
    client.update(sign_checkpoint(old, [key]))
    new = tree_head(tenant, "example.com/rocky")
    note = sign_checkpoint(new, [key])
    print("signed checkpoint:\n" + note)
    client.update(note, growth.consistency_proof)
    print(f"client now trusts size {client.latest.size if client.latest else 0}")

    # ... and Ed25519 when the optional extra is installed.
    try:
        from merkle_memory.signed_note import generate_ed25519_key, verifier_from_key

        skey, vkey = generate_ed25519_key("example.com/rocky")
        from merkle_memory.checkpoint import open_checkpoint

        signed = sign_checkpoint(new, [signer_from_key(skey)])
        assert open_checkpoint(signed, [verifier_from_key(vkey)]) == new
        print(f"Ed25519 checkpoint verifies with the public key {vkey}")
    except CheckpointError as exc:
        print(f"(Ed25519 skipped: {exc})")

    # 4. Refusals: a rollback and a forked history.
    try:
        client.update(sign_checkpoint(old, [key]))
    except CheckpointError as exc:
        print(f"refused: {exc}")
    forked = Checkpoint(new.origin, new.size, rfc6962.hash_leaf(b"another history"))
    try:
        client.update(sign_checkpoint(forked, [key]))
    except (CheckpointError, ProofError) as exc:
        print(f"refused: {exc}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        demo(Path(tmp))
