"""Timestamped Ed25519 cosignatures, cosignature/v1 (c2sp.org/tlog-cosignature), key type 0x04."""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import pytest
from support import asset_path

from merkle_memory.errors import CheckpointError
from merkle_memory.signed_note import (
    COSIGNATURE_TYPE,
    CosignatureSigner,
    CosignatureVerifier,
    Ed25519Signer,
    Ed25519Verifier,
    cosignature_message,
    cosignature_timestamp,
    cosigner_from_key,
    cosigner_verifier_from_key,
    generate_cosigner_key,
    open_note,
    parse_note,
    sign_note,
    signer_from_key,
    verifier_from_key,
)

pytest.importorskip("cryptography", reason="Ed25519 needs the optional extra 'ed25519'")


def _asset(*parts: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(asset_path(*parts).read_text())
    return data


KAT = _asset("tlog_upstream", "derived_cosignature.json")
SPEC = _asset("tlog", "c2sp_signed_note_and_tiles.json")
TEXT: str = KAT["checkpoint_text"]


def test_signed_message_is_the_spec_example_byte_for_byte() -> None:
    """cosignature_message of the spec's checkpoint at time 1679315147 is the spec's message."""
    message = cosignature_message(TEXT.encode(), KAT["timestamp"])
    assert message == SPEC["cosignature_v1_signed_message_example"].encode()
    assert SPEC["checkpoint_format_example"]["note_text"] == TEXT


def test_fixed_key_reproduces_the_fixed_cosignature() -> None:
    """The RFC 8032 TEST 1 key as witness.example.com/w1 at 1679315147 signs exactly the pinned
    line; its key strings and its 0x04 key ID (recomputed here with hashlib) are the pinned ones."""
    signer = CosignatureSigner(KAT["witness_name"], bytes.fromhex(KAT["seed_hex"]))
    fixed = signer.at(KAT["timestamp"])
    assert sign_note(TEXT, [fixed]) == TEXT + "\n" + KAT["cosignature_line"] + "\n"
    assert fixed.skey() == KAT["signer_key"]
    verifier = fixed.verifier()
    assert verifier.vkey() == KAT["verifier_key"]
    rfc = _asset("tlog_upstream", "rfc8032_ed25519.json")["tests"][0]
    assert verifier.public_key.hex() == rfc["public_key"]
    naive = hashlib.sha256(KAT["witness_name"].encode() + b"\n\x04" + verifier.public_key)
    assert verifier.key_id == int.from_bytes(naive.digest()[:4], "big")
    assert signer_from_key(KAT["signer_key"]) == signer
    assert verifier_from_key(KAT["verifier_key"]) == verifier
    raw = base64.b64decode(KAT["cosignature_line"].split(" ")[2])
    assert cosignature_timestamp(raw[4:]) == KAT["timestamp"]


def test_the_cosignature_verifies_and_only_as_a_cosignature() -> None:
    """The pinned cosignature opens with the 0x04 verifier; the same public key as an ordinary
    Ed25519 (0x01) verifier has another key ID, so the line is unknown to it."""
    note = TEXT + "\n" + KAT["cosignature_line"] + "\n"
    verifier = verifier_from_key(KAT["verifier_key"])
    assert open_note(note, [verifier]).verified_by == (KAT["witness_name"],)
    assert isinstance(verifier, CosignatureVerifier)
    plain = Ed25519Verifier(verifier.name, verifier.public_key)
    assert plain.key_id != verifier.key_id
    with pytest.raises(CheckpointError, match="no signature from a known key"):
        open_note(note, [plain])
    changed = note.replace("20852163", "20852164")
    with pytest.raises(CheckpointError, match="invalid signature"):
        open_note(changed, [verifier])


def test_spec_example_cosignature_carries_the_example_time() -> None:
    """The spec's cosignature line (tlog-cosignature example) holds key ID 8d66cf3f and the
    timestamp 1679315147 of the spec's signed-message example."""
    line = SPEC["checkpoint_format_example"]["cosignature_line"]
    raw = base64.b64decode(line.split(" ")[2])
    assert raw[:4].hex() == "8d66cf3f" and len(raw) == 4 + 8 + 64
    assert cosignature_timestamp(raw[4:]) == 1679315147


def test_transparency_dev_verifier_keys() -> None:
    """transparency-dev/formats: a 0x01 key converts to a cosigner key, a native 0x04 key
    parses with its key ID checked, and malformed keys are refused."""
    data = _asset("tlog_upstream", "transparency_dev_cosignature.json")
    converted = cosigner_verifier_from_key(data["valid_cosigner_vkeys"]["ed25519_type_0x01"])
    assert converted.name == "TEST"
    assert isinstance(
        verifier_from_key(data["valid_cosigner_vkeys"]["ed25519_type_0x01"]), Ed25519Verifier
    )
    native = verifier_from_key(data["valid_cosigner_vkeys"]["cosignature_type_0x04"])
    assert isinstance(native, CosignatureVerifier)
    assert f"{native.key_id:08x}" == "da77ade7"
    assert native.vkey() == data["valid_cosigner_vkeys"]["cosignature_type_0x04"]
    for bad in data["invalid_vkeys"].values():
        with pytest.raises(CheckpointError):
            cosigner_verifier_from_key(bad)
    stamped = base64.b64decode(data["cosignature_timestamp"]["signature_b64"])
    assert cosignature_timestamp(stamped[4:]) == data["cosignature_timestamp"]["timestamp"]
    with pytest.raises(CheckpointError, match="72 bytes"):
        cosignature_timestamp(base64.b64decode(data["not_a_cosignature_b64"])[4:])


def test_an_ed25519_signer_key_cosigns_under_the_0x04_key_id() -> None:
    """PeterNeumann's ordinary Ed25519 signer key, used as a cosigner, signs under the 0x04 key
    ID, verified by his 0x01 verifier key converted to a cosigner key."""
    go = _asset("tlog_upstream", "golang_mod_note.json")
    cosigner = cosigner_from_key(go["peter_skey"]).at(1700000000)
    assert isinstance(signer_from_key(go["peter_skey"]), Ed25519Signer)
    verifier = cosigner_verifier_from_key(go["peter_vkey"])
    assert cosigner.verifier() == verifier
    assert cosigner.key_id != 0xC74F20A3
    assert cosigner.skey().startswith("PRIVATE+KEY+PeterNeumann+")
    note = sign_note(TEXT, [cosigner])
    assert open_note(note, [verifier]).verified_by == ("PeterNeumann",)
    with pytest.raises(CheckpointError):
        cosigner_from_key("PRIVATE+KEY+a+00000000+" + base64.b64encode(bytes(33)).decode())


def test_timestamps_are_bounded_and_covered() -> None:
    """A timestamp beyond 2**63 - 1 is refused when signing and fails verification; changing
    the timestamp bytes or an extension line breaks the cosignature."""
    skey, vkey = generate_cosigner_key("w.example/1")
    signer = cosigner_from_key(skey)
    verifier = cosigner_verifier_from_key(vkey)
    with pytest.raises(CheckpointError):
        sign_note(TEXT, [signer.at(2**63)])
    with pytest.raises(CheckpointError):
        cosignature_message(b"x\n", -1)
    text = TEXT + "extension line\n"
    note = sign_note(text, [signer.at(5)])
    sig = parse_note(note).signatures[0]
    assert cosignature_timestamp(sig.signature) == 5
    big = (2**63).to_bytes(8, "big") + sig.signature[8:]
    assert not verifier.verify(text.encode(), big)
    later = (6).to_bytes(8, "big") + sig.signature[8:]
    assert not verifier.verify(text.encode(), later)
    assert not verifier.verify(text.replace("extension", "Extension").encode(), sig.signature)
    assert verifier.verify(text.encode(), sig.signature)
    assert COSIGNATURE_TYPE == b"\x04"


def test_rfc8032_vectors_through_the_note_keys() -> None:
    """Ed25519Signer reproduces RFC 8032 TEST 1-3 signatures and Ed25519Verifier accepts them."""
    for case in _asset("tlog_upstream", "rfc8032_ed25519.json")["tests"]:
        signer = Ed25519Signer("rfc8032", bytes.fromhex(case["secret_key"]))
        message = bytes.fromhex(case["message"])
        assert signer.sign(message).hex() == case["signature"]
        assert signer.verifier().public_key.hex() == case["public_key"]
        assert signer.verifier().verify(message, bytes.fromhex(case["signature"]))


def test_key_roles() -> None:
    """A private Ed25519 or cosigner key is no verifier key (an HMAC key, whose only form is the
    signer string, is); a cosigner key is no log key, as signer or as verifier."""
    from merkle_memory.signed_note import (
        CosignatureSigner,
        Ed25519Signer,
        HmacKey,
        log_signer_from_key,
        log_verifier_from_key,
        verifier_from_key,
    )

    log = Ed25519Signer("example.com/log", bytes(range(32)))
    witness = CosignatureSigner("witness.example/w1", bytes(range(32)))
    hmac_key = HmacKey("example.com/hmac", bytes(range(32)))
    for signer in (log, witness):
        with pytest.raises(CheckpointError) as caught:
            verifier_from_key(signer.skey())
        assert str(caught.value) == (
            f"key {signer.name!r} is a private signer key (PRIVATE+KEY+...): give its verifier "
            "key (<name>+<id>+<base64>, printed by keygen) where a verifier key is wanted"
        )
    assert verifier_from_key(hmac_key.skey()) == hmac_key
    assert log_verifier_from_key(hmac_key.skey()) == hmac_key
    assert log_signer_from_key(log.skey()) == log
    assert log_verifier_from_key(log.verifier().vkey()) == log.verifier()
    message = "key 'witness.example/w1' is a witness's cosigner key (type 0x04), not a log's key"
    with pytest.raises(CheckpointError) as caught:
        log_signer_from_key(witness.skey())
    assert str(caught.value) == message
    with pytest.raises(CheckpointError) as caught:
        log_verifier_from_key(witness.verifier().vkey())
    assert str(caught.value) == message
