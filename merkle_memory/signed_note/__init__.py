"""C2SP signed notes: text followed by a blank line and signature lines (c2sp.org/signed-note).

A signed note is UTF-8 text ending in a newline, a blank line, then one or more lines
``— <key name> <base64(4-byte big-endian key ID || signature)>`` (em dash U+2014, space). The
signature covers the text including its final newline. No ASCII control character other than
newline is allowed anywhere.

Verifying (``open_note``) follows the spec: signatures whose (name, key ID) match no known key
are ignored (key rotation, cosigners), even when they share the name or the ID (not both) with a
known key; a signature from a known key that fails rejects the whole note; at least one known
key must have signed. At most ``MAX_SIGNATURES`` (100) lines are read: the spec asks for at
least 16. Two different known keys with the same name and key ID are ambiguous: a signature
naming them is refused, as golang.org/x/mod/sumdb/note does.

Keys (see ``_keys`` for the formats): Ed25519 (registered type 0x01; signing needs the optional
extra ``ed25519``, verifying falls back to pure Python without it), timestamped Ed25519
cosignatures (type 0x04, c2sp.org/tlog-cosignature ``cosignature/v1``, the same) and
HMAC-SHA256 (type 0xff + ``merkle-memory/hmac-sha256``, built in, NOT publicly verifiable).

Quick start::

    skey, vkey = generate_ed25519_key("example.com/log")
    note = sign_note("hello\\n", [signer_from_key(skey)])
    assert open_note(note, [verifier_from_key(vkey)]).text == "hello\\n"
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import CheckpointError
from ._keys import (
    COSIGNATURE_TYPE,
    ED25519_TYPE,
    HMAC_TYPE,
    CosignatureSigner,
    CosignatureVerifier,
    Ed25519Signer,
    Ed25519Verifier,
    HmacKey,
    check_key_name,
    cosignature_message,
    cosignature_timestamp,
    cosigner_from_key,
    cosigner_verifier_from_key,
    generate_cosigner_key,
    generate_ed25519_key,
    generate_hmac_key,
    key_id,
    log_signer_from_key,
    log_verifier_from_key,
    signer_from_key,
    verifier_from_key,
)

__all__ = [
    "COSIGNATURE_TYPE",
    "ED25519_TYPE",
    "HMAC_TYPE",
    "MAX_SIGNATURES",
    "CosignatureSigner",
    "CosignatureVerifier",
    "Ed25519Signer",
    "Ed25519Verifier",
    "HmacKey",
    "Note",
    "NoteSignature",
    "Signer",
    "Verifier",
    "check_key_name",
    "cosignature_message",
    "cosignature_timestamp",
    "cosigner_from_key",
    "cosigner_verifier_from_key",
    "generate_cosigner_key",
    "generate_ed25519_key",
    "generate_hmac_key",
    "key_id",
    "log_signer_from_key",
    "log_verifier_from_key",
    "open_note",
    "parse_note",
    "sign_note",
    "signer_from_key",
    "verifier_from_key",
]

MAX_SIGNATURES = 100
"""Most signature lines a note may carry (the spec asks verifiers to accept at least 16)."""

_DASH = "\u2014 "


class Signer(Protocol):
    """Something that signs note text: a key ``name``, a uint32 ``key_id`` and ``sign``."""

    @property
    def name(self) -> str:
        """The key name written on the signature line (no spaces, no ``+``)."""
        ...

    @property
    def key_id(self) -> int:
        """uint32 key ID: the first 4 bytes of SHA-256(name || "\\n" || type || key), big-endian
        (C2SP signed-note)."""
        ...

    def sign(self, message: bytes) -> bytes:
        """Signature over ``message`` (the note text, ending in a newline), raw bytes."""
        ...


class Verifier(Protocol):
    """Something that checks note signatures: ``name``, uint32 ``key_id`` and ``verify``."""

    @property
    def name(self) -> str:
        """The key name that signature lines must carry to be checked by this verifier."""
        ...

    @property
    def key_id(self) -> int:
        """uint32 key ID that signature lines must carry (C2SP signed-note)."""
        ...

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Whether ``signature`` (raw bytes, key ID removed) signs ``message`` under this key.

        A protocol hook: the note verifier turns a ``False`` into a ``CheckpointError``.
        """
        ...


@dataclass(frozen=True, slots=True)
class NoteSignature:
    """One signature line.

    Attributes:
        name: the key name.
        key_id: the uint32 key ID (first 4 bytes of the decoded signature).
        signature: the signature bytes after the key ID.
    """

    name: str
    key_id: int
    signature: bytes

    def line(self) -> str:
        """Return the signature line without its newline."""
        raw = self.key_id.to_bytes(4, "big") + self.signature
        return f"{_DASH}{self.name} {base64.b64encode(raw).decode()}"


@dataclass(frozen=True, slots=True)
class Note:
    """A parsed signed note.

    Attributes:
        text: the signed text, ending in a newline.
        signatures: every signature line, in order.
        verified_by: names of the known keys whose signature verified (empty when only
            parsed), each once, in order of first signature.
        verified: the signature lines that verified, each (name, key ID, signature) once, in
            order.
    """

    text: str
    signatures: tuple[NoteSignature, ...]
    verified_by: tuple[str, ...] = ()
    verified: tuple[NoteSignature, ...] = ()

    def signed(self) -> str:
        """Return the note as text again: the text, a blank line and every signature line."""
        return self.text + "\n" + "".join(sig.line() + "\n" for sig in self.signatures)


def _check_keys(keys: object, role: str, method: str) -> list[Any]:
    """``keys`` as a list, each with ``name``, ``key_id`` and ``method``; else CheckpointError."""
    if isinstance(keys, str | bytes) or not isinstance(keys, Sequence | set | frozenset):
        raise CheckpointError(
            f"{role}s are a sequence of {role} keys, not {type(keys).__name__} "
            f"(signed_note.{role}_from_key makes one from a key string)"
        )
    out = list(keys)
    for key in out:
        if not all(hasattr(key, a) for a in ("name", "key_id", method)):
            raise CheckpointError(
                f"{type(key).__name__} is not a {role} key (it has no name, key_id and "
                f"{method}; signed_note.{role}_from_key makes one from a key string)"
            )
    return out


def _check_text(text: str, what: str) -> None:
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        raise CheckpointError(f"{what} holds an ASCII control character other than newline")


def sign_note(text: str, signers: Sequence[Signer]) -> str:
    """Return the signed note of ``text`` signed by each of ``signers`` in order.

    Args:
        text: the note text: non-empty, ending in a newline, no control characters but
            newline.
        signers: at least one signer.

    Raises:
        CheckpointError: bad text, no signer, something that is not a signer (no ``name``,
            ``key_id`` and ``sign``), or an invalid key name.
    """
    if not isinstance(text, str) or not text.endswith("\n"):
        raise CheckpointError("note text must be a string ending in a newline")
    _check_text(text, "note text")
    signers = _check_keys(signers, "signer", "sign")
    if not signers:
        raise CheckpointError("a signed note needs at least one signer")
    message = _encode(text)
    lines = [
        NoteSignature(check_key_name(s.name), s.key_id, s.sign(message)).line() for s in signers
    ]
    return text + "\n" + "".join(line + "\n" for line in lines)


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8", "strict")
    except UnicodeEncodeError as exc:
        raise CheckpointError("note text is not encodable as UTF-8 (lone surrogate)") from exc


def parse_note(note: str | bytes) -> Note:
    """Parse a signed note without verifying it.

    Raises:
        CheckpointError: not UTF-8, control characters, no blank line before the signatures,
            a malformed signature line, or more than ``MAX_SIGNATURES`` of them.
    """
    if isinstance(note, bytes):
        try:
            note = note.decode("utf-8", "strict")
        except UnicodeDecodeError as exc:
            raise CheckpointError("signed note is not valid UTF-8") from exc
    if not isinstance(note, str):
        raise CheckpointError("signed note must be text")
    _encode(note)
    _check_text(note, "signed note")
    if not note.endswith("\n"):
        raise CheckpointError("signed note does not end in a newline (a truncated file?)")
    split = note.rfind("\n\n")
    if split < 0:
        raise CheckpointError("signed note has no blank line before its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    lines = block[:-1].split("\n") if block else []
    if not lines:
        raise CheckpointError("signed note has no signature lines")
    if len(lines) > MAX_SIGNATURES:
        raise CheckpointError(f"signed note has more than {MAX_SIGNATURES} signatures")
    signatures: list[NoteSignature] = []
    for line in lines:
        if not line.startswith(_DASH):
            raise CheckpointError(f"malformed signature line {line[:80]!r}")
        parts = line[len(_DASH) :].split(" ")
        if len(parts) != 2:
            raise CheckpointError(f"malformed signature line {line[:80]!r}")
        name = check_key_name(parts[0])
        try:
            raw = base64.b64decode(parts[1], validate=True)
        except (binascii.Error, ValueError) as exc:
            raise CheckpointError(f"signature of {name!r} is not base64") from exc
        if len(raw) < 5:
            raise CheckpointError(f"signature of {name!r} is too short")
        signatures.append(NoteSignature(name, int.from_bytes(raw[:4], "big"), raw[4:]))
    return Note(text, tuple(signatures))


def open_note(note: str | bytes, verifiers: Sequence[Verifier]) -> Note:
    """Parse and verify a signed note against the known keys ``verifiers``.

    Signatures by unknown keys (no verifier with both the same name and key ID) are ignored.

    Returns:
        The note, with ``verified_by`` naming the known keys whose signatures verified and
        ``verified`` holding those signature lines.

    Raises:
        CheckpointError: ``verifiers`` is not a sequence of verifiers (each with ``name``,
            ``key_id`` and ``verify``), a malformed note (see ``parse_note``), a known key's
            signature that does not verify, a signature naming two different known keys with
            the same name and key ID ("ambiguous key"), or no signature from any known key.
    """
    verifiers = _check_keys(verifiers, "verifier", "verify")
    parsed = parse_note(note)
    message = _encode(parsed.text)
    known: dict[tuple[str, int], list[Verifier]] = {}
    for v in verifiers:
        same = known.setdefault((v.name, v.key_id), [])
        if v not in same:
            same.append(v)
    names: list[str] = []
    verified: list[NoteSignature] = []
    for sig in parsed.signatures:
        candidates = known.get((sig.name, sig.key_id))
        if not candidates:
            continue
        if len(candidates) > 1:
            raise CheckpointError(f"ambiguous key {sig.name}+{sig.key_id:08x}")
        if not candidates[0].verify(message, sig.signature):
            raise CheckpointError(f"invalid signature for key {sig.name}+{sig.key_id:08x}")
        if sig not in verified:
            verified.append(sig)
        if sig.name not in names:
            names.append(sig.name)
    if not verified:
        raise CheckpointError("signed note carries no signature from a known key")
    return Note(parsed.text, parsed.signatures, tuple(names), tuple(verified))
