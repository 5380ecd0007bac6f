"""Checkpoints, signed notes, keys and the checkpoint client (C2SP tlog-checkpoint)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from support import asset_path

from merkle_memory import rfc6962
from merkle_memory.checkpoint import Checkpoint, CheckpointClient, open_checkpoint, sign_checkpoint
from merkle_memory.errors import CheckpointError, ProofError, RootMismatchError
from merkle_memory.proof import consistency_proof
from merkle_memory.signed_note import (
    HmacKey,
    generate_hmac_key,
    open_note,
    parse_note,
    sign_note,
    signer_from_key,
    verifier_from_key,
)

LEAVES = [rfc6962.hash_leaf(b"%d" % i) for i in range(20)]
HMAC = HmacKey("log.example/a", bytes(range(32)))


def _ed25519() -> None:
    pytest.importorskip("cryptography", reason="Ed25519 needs the optional extra 'ed25519'")


def _vector() -> dict:
    path = asset_path("tlog", "c2sp_signed_note_and_tiles.json")
    return json.loads(path.read_text())


def test_c2sp_signed_note_vector_verifies() -> None:
    """The C2SP Ed25519 example note verifies with its vkey, whose key ID is 530d903a."""
    _ed25519()
    case = _vector()["signed_note_ed25519"]
    verifier = verifier_from_key(case["vkey"])
    assert f"{verifier.key_id:08x}" == case["key_id_hex"]
    assert verifier.public_key.hex() == case["public_key_hex"]
    note = open_note(case["signed_note"], [verifier])
    assert note.text == case["note_text"] and note.verified_by == ("example.com/foo",)
    forged = case["signed_note"].replace("example message", "example massage")
    with pytest.raises(CheckpointError):
        open_note(forged, [verifier])


def test_checkpoint_format_example_parses() -> None:
    """The C2SP checkpoint body example parses to origin, size and a 32-byte root."""
    text = _vector()["checkpoint_format_example"]["note_text"]
    cp = Checkpoint.from_text(text)
    assert (cp.origin, cp.size) == ("example.com/behind-the-sofa", 20852163)
    assert cp.to_text() == text and len(cp.root) == 32


def test_checkpoint_text_round_trip_and_strictness() -> None:
    """to_text/from_text round-trip; bad sizes, roots and missing lines are refused."""
    cp = Checkpoint("o.example/log", 5, rfc6962.root(LEAVES[:5]), ("ext line",))
    assert Checkpoint.from_text(cp.to_text()) == cp
    root64 = base64.b64encode(cp.root).decode()
    for bad in (
        f"o\n05\n{root64}\n",
        f"o\n-5\n{root64}\n",
        f"o\n+5\n{root64}\n",
        "o\n5\nAAAA\n",
        f"o\n5\n{root64}",
        "o\n5\n",
        f"\n5\n{root64}\n",
        f"o\n5\n{root64}\n\n",
    ):
        with pytest.raises(CheckpointError):
            Checkpoint.from_text(bad)
    with pytest.raises(CheckpointError):
        Checkpoint("o", -1, cp.root)
    with pytest.raises(CheckpointError):
        Checkpoint("o", 1, b"x")


def test_hmac_sign_and_open() -> None:
    """An HMAC-signed checkpoint opens with the key; a changed body or key fails."""
    cp = Checkpoint("log.example/a", 3, rfc6962.root(LEAVES[:3]))
    note = sign_checkpoint(cp, [HMAC])
    assert note.startswith(cp.to_text() + "\n\u2014 log.example/a ")
    assert open_checkpoint(note, [HMAC], origin="log.example/a") == cp
    with pytest.raises(CheckpointError):
        open_checkpoint(note, [HMAC], origin="other")
    with pytest.raises(CheckpointError):
        open_checkpoint(note.replace("\n3\n", "\n4\n"), [HMAC])
    other = HmacKey("log.example/a", bytes(32))
    with pytest.raises(CheckpointError):  # same name, other key id: unknown, so none known
        open_checkpoint(note, [other])


def test_unknown_signatures_ignored_known_bad_rejected() -> None:
    """Unknown keys' lines are ignored; a bad signature by a known key rejects the note."""
    stranger = HmacKey("witness.example/w", bytes([7]) * 32)
    note = sign_note("hello\n", [stranger, HMAC])
    assert open_note(note, [HMAC]).verified_by == ("log.example/a",)
    sig = parse_note(note).signatures[1]
    tampered_raw = sig.key_id.to_bytes(4, "big") + bytes(32)
    bad_line = "\u2014 log.example/a " + base64.b64encode(tampered_raw).decode()
    with pytest.raises(CheckpointError):
        open_note("hello\n\n" + bad_line + "\n", [HMAC])
    with pytest.raises(CheckpointError):
        open_note(sign_note("hello\n", [stranger]), [HMAC])


def test_malformed_notes_refused() -> None:
    """No blank line, control characters, bad base64 and bad dashes raise CheckpointError."""
    good = sign_note("hi\n", [HMAC])
    for bad in (
        "hi\n",
        good.replace("\u2014", "-"),
        good.replace("hi", "h\ti"),
        good[:-1],
        "hi\n\n\u2014 log.example/a !!!!\n",
        b"\xff\xfe",
    ):
        with pytest.raises(CheckpointError):
            open_note(bad, [HMAC])
    with pytest.raises(CheckpointError):
        sign_note("no newline", [HMAC])
    with pytest.raises(CheckpointError):
        sign_note("x\n", [])


def test_key_strings_round_trip() -> None:
    """Generated HMAC and Ed25519 key strings parse back; a wrong key id is refused."""
    skey = generate_hmac_key("me.example/k")
    signer = signer_from_key(skey)
    assert isinstance(signer, HmacKey) and signer.skey() == skey
    assert verifier_from_key(skey) == signer
    parts = skey.split("+")
    parts[3] = "00000000" if parts[3] != "00000000" else "00000001"
    with pytest.raises(CheckpointError):
        signer_from_key("+".join(parts))
    for bad in ("", "name+1234+AAAA", "PRIVATE+KEY+a b+00000000+AA==", "x+y"):
        with pytest.raises(CheckpointError):
            verifier_from_key(bad)


def test_ed25519_sign_and_open() -> None:
    """An Ed25519-signed checkpoint opens with the vkey; the vkey cannot sign."""
    _ed25519()
    from merkle_memory.signed_note import generate_ed25519_key

    skey, vkey = generate_ed25519_key("log.example/ed")
    cp = Checkpoint("log.example/ed", 20, rfc6962.root(LEAVES))
    note = sign_checkpoint(cp, [signer_from_key(skey)])
    assert open_checkpoint(note, [verifier_from_key(vkey)]) == cp
    with pytest.raises(CheckpointError):
        signer_from_key(vkey)


def _note(size: int, leaves: list[bytes] = LEAVES) -> str:
    return sign_checkpoint(Checkpoint("log.example/a", size, rfc6962.root(leaves[:size])), [HMAC])


def test_client_accepts_extension_refuses_rollback_and_fork(tmp_path: Path) -> None:
    """The client trusts the first checkpoint, then needs a consistency proof; a smaller
    size, another root at the same size, or a bad proof raise and keep the old state."""
    state = tmp_path / "trusted.note"
    client = CheckpointClient(state, [HMAC], "log.example/a")
    assert client.latest is None
    assert client.update(_note(5)).size == 5
    assert client.update(_note(12), consistency_proof(5, 12, LEAVES)).size == 12
    assert client.update(_note(12)).size == 12
    with pytest.raises(CheckpointError, match="rollback"):
        client.update(_note(11))
    forked = [*LEAVES[:11], rfc6962.hash_leaf(b"evil"), *LEAVES[12:]]
    with pytest.raises(CheckpointError, match="fork"):
        client.update(_note(12, forked))
    with pytest.raises(RootMismatchError):
        client.update(_note(15, forked), consistency_proof(12, 15, LEAVES))
    with pytest.raises(ProofError):
        client.update(_note(15), [])
    assert client.latest is not None and client.latest.size == 12
    assert open_checkpoint(state.read_text(), [HMAC]).size == 12


def test_client_refuses_tampered_state(tmp_path: Path) -> None:
    """A state file altered on disk no longer verifies and is refused, not trusted."""
    state = tmp_path / "trusted.note"
    client = CheckpointClient(state, [HMAC], "log.example/a")
    client.update(_note(5))
    state.write_text(state.read_text().replace("\n5\n", "\n6\n"))
    with pytest.raises(CheckpointError):
        client.update(_note(7), consistency_proof(5, 7, LEAVES))
