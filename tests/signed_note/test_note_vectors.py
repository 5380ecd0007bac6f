"""C2SP signed notes to the letter: golang/mod sumdb/note known answers, byte for byte."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass
from typing import Any

import pytest
from support import asset_path

from merkle_memory.errors import CheckpointError
from merkle_memory.signed_note import (
    MAX_SIGNATURES,
    Ed25519Signer,
    Ed25519Verifier,
    HmacKey,
    open_note,
    parse_note,
    sign_note,
    signer_from_key,
    verifier_from_key,
)

pytest.importorskip("cryptography", reason="Ed25519 needs the optional extra 'ed25519'")


def _go() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        asset_path("tlog_upstream", "golang_mod_note.json").read_text()
    )
    return data


GO = _go()
PETER = verifier_from_key(GO["peter_vkey"])
ENOCH = verifier_from_key(GO["enoch_vkey"])
TEXT: str = GO["text"]
PETER_SIG: str = GO["peter_sig_line"]
ENOCH_SIG: str = GO["enoch_sig_line"]


def _refused(parse: Any, text: str) -> bool:
    try:
        parse(text)
    except CheckpointError:
        return True
    return False


def test_verifier_key_parses_and_its_key_id_is_the_published_one() -> None:
    """PeterNeumann's vkey parses into an Ed25519 key with key ID c74f20a3 and writes back the
    same string; EnochRoot's has af0cfe78."""
    assert isinstance(PETER, Ed25519Verifier)
    assert (PETER.name, f"{PETER.key_id:08x}") == ("PeterNeumann", GO["peter_key_id"])
    assert PETER.vkey() == GO["peter_vkey"]
    assert f"{ENOCH.key_id:08x}" == GO["enoch_key_id"] and ENOCH.vkey() == GO["enoch_vkey"]


def test_every_mangled_verifier_key_is_refused() -> None:
    """As TestNewVerifier: every proper substring and every single byte + 1 of the vkey is
    refused, and so are the wrong-length and unknown-algorithm keys with adjusted key IDs."""
    vkey = GO["peter_vkey"]
    for i in range(len(vkey) + 1):
        for j in range(i + 1, len(vkey) + 1):
            if (i, j) != (0, len(vkey)):
                assert _refused(verifier_from_key, vkey[i:j]), vkey[i:j]
    for i in range(len(vkey)):
        bumped = vkey[:i] + chr(ord(vkey[i]) + 1) + vkey[i + 1 :]
        assert _refused(verifier_from_key, bumped), bumped
    for bad in GO["bad_vkeys"].values():
        assert _refused(verifier_from_key, bad)


def test_every_mangled_signer_key_is_refused() -> None:
    """As TestNewSigner: the skey parses; every proper substring and byte + 1 is refused."""
    skey = GO["peter_skey"]
    signer = signer_from_key(skey)
    assert isinstance(signer, Ed25519Signer) and signer.skey() == skey
    assert signer.verifier() == PETER
    for i in range(len(skey) + 1):
        for j in range(i + 1, len(skey) + 1):
            if (i, j) != (0, len(skey)):
                assert _refused(signer_from_key, skey[i:j]), skey[i:j]
    for i in range(len(skey)):
        bumped = skey[:i] + chr(ord(skey[i]) + 1) + skey[i + 1 :]
        assert _refused(signer_from_key, bumped), bumped


def test_sign_reproduces_the_go_note_byte_for_byte() -> None:
    """As TestSign: signing the text with PeterNeumann's key gives exactly the Go output."""
    assert sign_note(TEXT, [signer_from_key(GO["peter_skey"])]) == GO["signed_by_peter"]
    with pytest.raises(CheckpointError):
        sign_note("abc", [signer_from_key(GO["peter_skey"])])


def test_open_one_known_one_unknown_and_both() -> None:
    """As TestOpen: with Peter's key only Peter's line verifies and Enoch's is ignored; with
    both keys both verify; with none the note is refused."""
    note = TEXT + "\n" + PETER_SIG + ENOCH_SIG
    opened = open_note(note, [PETER])
    assert opened.text == TEXT
    assert opened.verified_by == ("PeterNeumann",)
    assert [(s.name, s.key_id) for s in opened.verified] == [("PeterNeumann", 0xC74F20A3)]
    both = open_note(note, [PETER, ENOCH])
    assert both.verified_by == ("PeterNeumann", "EnochRoot")
    with pytest.raises(CheckpointError, match="no signature from a known key"):
        open_note(note, [])


def test_an_invalid_signature_by_a_known_key_rejects_the_note() -> None:
    """Peter's line with four base64 characters inserted is refused with Go's message."""
    bad = TEXT + "\n" + PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(CheckpointError, match=re.escape(GO["errors"]["invalid_signature"])):
        open_note(bad, [PETER])


def test_duplicated_and_unverifiable_lines() -> None:
    """Peter's line twice, Enoch's twice and a mangled Enoch line: opened with Peter's key the
    note verifies once by Peter (Enoch's lines are unknown keys, never checked)."""
    enoch_abcd = ENOCH_SIG[:60] + "ABCD" + ENOCH_SIG[60:]
    note = TEXT + "\n" + PETER_SIG + PETER_SIG + ENOCH_SIG + ENOCH_SIG + enoch_abcd
    opened = open_note(note, [PETER])
    assert opened.verified_by == ("PeterNeumann",) and len(opened.verified) == 1
    assert len(opened.signatures) == 5


def test_too_many_signatures_are_refused_but_sixteen_distinct_ones_verify() -> None:
    """101 signature lines are malformed (Go's limit, 100); 100 are read; 16 distinct keys'
    signatures all verify (the spec's minimum)."""
    with pytest.raises(CheckpointError, match="more than 100"):
        open_note(TEXT + "\n" + PETER_SIG * 101, [PETER])
    with pytest.raises(CheckpointError, match="more than 100"):
        open_note(TEXT + "\n" + PETER_SIG * 101, [])
    assert GO["max_signatures"] == MAX_SIGNATURES
    assert open_note(TEXT + "\n" + PETER_SIG * 100, [PETER]).verified_by == ("PeterNeumann",)
    keys = [HmacKey(f"k{i}.example/log", bytes([i]) * 32) for i in range(16)]
    opened = open_note(sign_note(TEXT, keys), keys)
    assert len(opened.verified) == 16


def test_malformed_messages() -> None:
    """As TestOpen's bad messages: no signatures, a missing final newline, a control
    character, invalid UTF-8, a key name with a space, a line after the signatures."""
    bad_name = TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Bad Name")
    for msg in (
        TEXT,
        TEXT + "\n",
        TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + TEXT + "\n" + PETER_SIG,
        bad_name,
        TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
    ):
        with pytest.raises(CheckpointError):
            open_note(msg, [PETER])
    with pytest.raises(CheckpointError):
        open_note(b"\xff" + (TEXT + "\n" + PETER_SIG).encode(), [PETER])


def test_same_name_or_same_id_is_another_key() -> None:
    """A line with Peter's name but another key ID, or another name with Peter's key ID, is an
    unknown key: ignored, so the note verifies by Enoch alone."""
    raw = base64.b64decode(PETER_SIG.split(" ")[2])
    other_id = (0xC74F20A4).to_bytes(4, "big") + raw[4:]
    wrong_id = "\u2014 PeterNeumann " + base64.b64encode(other_id).decode() + "\n"
    misnamed = PETER_SIG.replace("PeterNeumann", "CarmenSandiego")
    note = TEXT + "\n" + wrong_id + misnamed + ENOCH_SIG
    opened = open_note(note, [PETER, ENOCH])
    assert opened.verified_by == ("EnochRoot",)
    with pytest.raises(CheckpointError, match="no signature from a known key"):
        open_note(TEXT + "\n" + wrong_id + misnamed, [PETER])


@dataclass(frozen=True)
class _Fixed:
    """A verifier with a chosen name and key ID (two different keys that collide)."""

    name: str
    key_id: int
    answer: bool

    def verify(self, message: bytes, signature: bytes) -> bool:
        return self.answer


def test_two_different_known_keys_with_one_name_and_id_are_ambiguous() -> None:
    """As TestVerifierList: two different known keys for (EnochRoot, af0cfe78) make a
    signature naming them an error; the same key given twice is not ambiguous; an unused
    collision does not matter."""
    one = _Fixed("EnochRoot", 0xAF0CFE78, True)
    two = _Fixed("EnochRoot", 0xAF0CFE78, False)
    with pytest.raises(CheckpointError, match=re.escape(GO["errors"]["ambiguous"])):
        open_note(TEXT + "\n" + ENOCH_SIG, [one, PETER, two])
    assert open_note(TEXT + "\n" + ENOCH_SIG, [ENOCH, PETER, ENOCH]).verified_by == ("EnochRoot",)
    assert open_note(TEXT + "\n" + PETER_SIG, [one, PETER, two]).verified_by == ("PeterNeumann",)


def test_c2sp_poem_keeps_its_blank_line_in_the_text() -> None:
    """signed-note: the text ends at the last blank line, so an empty line inside it stays."""
    data = json.loads(asset_path("tlog_upstream", "c2sp_examples.json").read_text())
    parsed = parse_note(data["signed_note_poem"])
    assert parsed.text == data["signed_note_poem_text"]
    assert [s.name for s in parsed.signatures] == ["quasimodo.example/salvatore"]
    assert parsed.signed() == data["signed_note_poem"]
