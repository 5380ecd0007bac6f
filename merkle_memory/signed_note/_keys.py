"""Note signers and verifiers, and their key strings (private; see ``signed_note``).

Key strings follow golang.org/x/mod/sumdb/note:

* verifier key ``<name>+<key id, 8 hex>+<base64(type || public key)>``
* signer key ``PRIVATE+KEY+<name>+<key id, 8 hex>+<base64(type || private key)>``

with ``key id = SHA-256(name || 0x0A || type || public key)[:4]`` (C2SP signed-note).

Ed25519 (type ``0x01``, the registered one; public key 32 bytes, private key the 32-byte RFC
8032 seed) needs the optional extra ``ed25519`` (the ``cryptography`` package), imported only
when an Ed25519 key is used.

HMAC-SHA256 is built in under the type ``0xff`` (C2SP: "reserved for signature types without
an identifier byte assigned by this specification", to be followed by a longer identifier)
followed by ``merkle-memory/hmac-sha256``. Its "public key" is the secret itself (16 bytes or
more, 32 when generated), so anyone able to verify can also sign: it is NOT publicly
verifiable and only fits a single party checking its own checkpoints. Its key id is
``SHA-256(name || 0x0A || type || secret)[:4]``, its signature ``HMAC-SHA256(secret, text)``
(32 bytes), and its only key string is the signer form (``PRIVATE+KEY+...``), which serves
both to sign and to verify.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Any

from ..errors import CheckpointError

__all__ = [
    "ED25519_TYPE",
    "HMAC_TYPE",
    "Ed25519Signer",
    "Ed25519Verifier",
    "HmacKey",
    "generate_ed25519_key",
    "generate_hmac_key",
    "key_id",
    "signer_from_key",
    "verifier_from_key",
]

ED25519_TYPE = b"\x01"
HMAC_TYPE = b"\xffmerkle-memory/hmac-sha256"
_PRIVATE_PREFIX = "PRIVATE+KEY+"
_MIN_HMAC_SECRET = 16


def key_id(name: str, type_and_key: bytes) -> int:
    """Return the C2SP key ID ``SHA-256(name || 0x0A || type || key)[:4]`` as a uint32."""
    digest = hashlib.sha256(name.encode() + b"\n" + type_and_key).digest()
    return int.from_bytes(digest[:4], "big")


def check_key_name(name: object) -> str:
    """Return ``name`` if it is a valid note key name, else raise ``CheckpointError``."""
    if (
        not isinstance(name, str)
        or not name
        or "+" in name
        or any(c.isspace() or ord(c) < 0x20 for c in name)
    ):
        raise CheckpointError(f"invalid key name {name!r}: non-empty, no spaces and no '+'")
    return name


def _ed25519() -> Any:
    try:
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError as exc:
        raise CheckpointError(
            "Ed25519 keys need the optional extra: pip install 'merkle_memory[ed25519]'"
        ) from exc
    return ed25519


@dataclass(frozen=True, slots=True)
class Ed25519Verifier:
    """Verifies Ed25519 (type 0x01) note signatures.

    Attributes:
        name: the key name.
        public_key: the 32-byte RFC 8032 public key.
    """

    name: str
    public_key: bytes

    @property
    def key_id(self) -> int:
        """The uint32 C2SP key ID."""
        return key_id(self.name, ED25519_TYPE + self.public_key)

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Return whether ``signature`` (64 bytes) is valid for ``message``."""
        ed = _ed25519()
        from cryptography.exceptions import InvalidSignature

        try:
            ed.Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True

    def vkey(self) -> str:
        """Return the verifier key string ``<name>+<id>+<base64(0x01 || public key)>``."""
        encoded = base64.b64encode(ED25519_TYPE + self.public_key).decode()
        return f"{self.name}+{self.key_id:08x}+{encoded}"


@dataclass(frozen=True, slots=True)
class Ed25519Signer:
    """Signs notes with Ed25519 (type 0x01).

    Attributes:
        name: the key name.
        seed: the 32-byte RFC 8032 private key (seed).
    """

    name: str
    seed: bytes

    def verifier(self) -> Ed25519Verifier:
        """The matching verifier (public key derived from the seed)."""
        ed = _ed25519()
        from cryptography.hazmat.primitives import serialization

        public = (
            ed.Ed25519PrivateKey.from_private_bytes(self.seed)
            .public_key()
            .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        )
        return Ed25519Verifier(self.name, public)

    @property
    def key_id(self) -> int:
        """The uint32 C2SP key ID."""
        return self.verifier().key_id

    def sign(self, message: bytes) -> bytes:
        """Return the 64-byte Ed25519 signature of ``message``."""
        signature: bytes = _ed25519().Ed25519PrivateKey.from_private_bytes(self.seed).sign(message)
        return signature

    def skey(self) -> str:
        """Return the signer key string ``PRIVATE+KEY+<name>+<id>+<base64(0x01 || seed)>``."""
        encoded = base64.b64encode(ED25519_TYPE + self.seed).decode()
        return f"{_PRIVATE_PREFIX}{self.name}+{self.key_id:08x}+{encoded}"


@dataclass(frozen=True, slots=True)
class HmacKey:
    """Signs and verifies notes with HMAC-SHA256 (NOT publicly verifiable; see module doc).

    Attributes:
        name: the key name.
        secret: the shared secret, at least 16 bytes.
    """

    name: str
    secret: bytes

    @property
    def key_id(self) -> int:
        """The uint32 key ID, ``SHA-256(name || 0x0A || 0xff || ident || secret)[:4]``."""
        return key_id(self.name, HMAC_TYPE + self.secret)

    def sign(self, message: bytes) -> bytes:
        """Return ``HMAC-SHA256(secret, message)``, 32 bytes."""
        return hmac.new(self.secret, message, hashlib.sha256).digest()

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Return whether ``signature`` is the HMAC of ``message`` (constant-time compare)."""
        return hmac.compare_digest(self.sign(message), signature)

    def verifier(self) -> HmacKey:
        """The verifier: the same key (whoever verifies can sign)."""
        return self

    def skey(self) -> str:
        """Return ``PRIVATE+KEY+<name>+<id>+<base64(HMAC_TYPE || secret)>``."""
        encoded = base64.b64encode(HMAC_TYPE + self.secret).decode()
        return f"{_PRIVATE_PREFIX}{self.name}+{self.key_id:08x}+{encoded}"


def generate_ed25519_key(name: str) -> tuple[str, str]:
    """Generate an Ed25519 key; return ``(signer key string, verifier key string)``.

    Raises:
        CheckpointError: invalid name, or the ``ed25519`` extra is not installed.
    """
    signer = Ed25519Signer(check_key_name(name), secrets.token_bytes(32))
    return signer.skey(), signer.verifier().vkey()


def generate_hmac_key(name: str) -> str:
    """Generate a 32-byte HMAC-SHA256 key; return its key string (signs and verifies).

    Raises:
        CheckpointError: invalid name.
    """
    return HmacKey(check_key_name(name), secrets.token_bytes(32)).skey()


def _split(text: str, private: bool) -> tuple[str, int, bytes]:
    what = "signer key" if private else "verifier key"
    body = text.strip()
    if private:
        body = body[len(_PRIVATE_PREFIX) :]
    parts = body.split("+", 2)
    if len(parts) != 3 or len(parts[1]) != 8:
        raise CheckpointError(f"malformed {what} string")
    name = check_key_name(parts[0])
    try:
        hint = int(parts[1], 16)
        raw = base64.b64decode(parts[2], validate=True)
    except (ValueError, binascii.Error) as exc:
        raise CheckpointError(f"malformed {what} string: {exc}") from exc
    if not raw:
        raise CheckpointError(f"{what} has no key bytes")
    return name, hint, raw


def _check_id(name: str, hint: int, actual: int) -> None:
    if hint != actual:
        raise CheckpointError(f"key id {hint:08x} of key {name!r} does not match its key")


def signer_from_key(text: str) -> Ed25519Signer | HmacKey:
    """Parse a signer key string (``PRIVATE+KEY+...``) into a signer.

    Raises:
        CheckpointError: malformed string, unknown type, wrong key length or key id, or an
            Ed25519 key without the ``ed25519`` extra.
    """
    if not isinstance(text, str) or not text.strip().startswith(_PRIVATE_PREFIX):
        raise CheckpointError("a signer key string starts with 'PRIVATE+KEY+'")
    name, hint, raw = _split(text, private=True)
    signer: Ed25519Signer | HmacKey
    if raw[:1] == ED25519_TYPE and len(raw) == 33:
        signer = Ed25519Signer(name, raw[1:])
    elif raw.startswith(HMAC_TYPE) and len(raw) - len(HMAC_TYPE) >= _MIN_HMAC_SECRET:
        signer = HmacKey(name, raw[len(HMAC_TYPE) :])
    else:
        raise CheckpointError(f"unsupported signer key type or length for key {name!r}")
    _check_id(name, hint, signer.key_id)
    return signer


def verifier_from_key(text: str) -> Ed25519Verifier | HmacKey:
    """Parse a verifier key string, or a signer key string (for HMAC, the only form).

    Raises:
        CheckpointError: malformed string, unknown type, wrong key length or key id.
    """
    if isinstance(text, str) and text.strip().startswith(_PRIVATE_PREFIX):
        return signer_from_key(text).verifier()
    if not isinstance(text, str):
        raise CheckpointError("a verifier key must be a string")
    name, hint, raw = _split(text, private=False)
    if raw[:1] == ED25519_TYPE and len(raw) == 33:
        verifier = Ed25519Verifier(name, raw[1:])
    else:
        raise CheckpointError(f"unsupported verifier key type or length for key {name!r}")
    _check_id(name, hint, verifier.key_id)
    return verifier
