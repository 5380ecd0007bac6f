"""Note signers and verifiers, and their key strings (private; see ``signed_note``).

Key strings follow golang.org/x/mod/sumdb/note:

* verifier key ``<name>+<key id, 8 hex>+<base64(type || public key)>``
* signer key ``PRIVATE+KEY+<name>+<key id, 8 hex>+<base64(type || private key)>``

with ``key id = SHA-256(name || 0x0A || type || public key)[:4]`` (C2SP signed-note).

Ed25519 (type ``0x01``, the registered one; public key 32 bytes, private key the 32-byte RFC
8032 seed) signs with the optional extra ``ed25519`` (the ``cryptography`` package), imported
only when an Ed25519 key is used. Verifying works without it: the pure-Python RFC 8032 verifier
of ``_ed25519`` is used when ``cryptography`` is absent (slower, about 5 ms a signature).

Timestamped Ed25519 cosignatures (type ``0x04``, c2sp.org/tlog-cosignature ``cosignature/v1``)
use the same Ed25519 keys: the key ID hashes ``0x04 || public key``, the signer key string may
carry type ``0x04`` or ``0x01`` (an ordinary Ed25519 signer key turned into a cosigner, as
transparency-dev/formats allows), and the verifier key carries ``0x04``. The signature is
``u64 big-endian timestamp || Ed25519 signature`` over ``"cosignature/v1\n" || "time " ||
decimal timestamp || "\n" || note text``.

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
import re
import secrets
import time
from dataclasses import dataclass, replace
from typing import Any

from ..errors import CheckpointError
from . import _ed25519 as _ed25519_pure

__all__ = [
    "COSIGNATURE_TYPE",
    "ED25519_TYPE",
    "HMAC_TYPE",
    "CosignatureSigner",
    "CosignatureVerifier",
    "Ed25519Signer",
    "Ed25519Verifier",
    "HmacKey",
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
    "signer_from_key",
    "verifier_from_key",
]

ED25519_TYPE = b"\x01"
COSIGNATURE_TYPE = b"\x04"
HMAC_TYPE = b"\xffmerkle-memory/hmac-sha256"
_PRIVATE_PREFIX = "PRIVATE+KEY+"
_MIN_HMAC_SECRET = 16
_KEY_ID = re.compile(r"[0-9a-f]{8}\Z")
_MAX_TIMESTAMP = 2**63 - 1
_COSIGNATURE_HEADER = b"cosignature/v1\n"


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


def _ed25519_public(seed: bytes) -> bytes:
    """The 32-byte RFC 8032 public key of a 32-byte seed (needs the ``ed25519`` extra)."""
    ed = _ed25519()
    from cryptography.hazmat.primitives import serialization

    public: bytes = (
        ed.Ed25519PrivateKey.from_private_bytes(seed)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    return public


def _ed25519_sign(seed: bytes, message: bytes) -> bytes:
    signature: bytes = _ed25519().Ed25519PrivateKey.from_private_bytes(seed).sign(message)
    return signature


def _ed25519_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Verify with ``cryptography`` when installed, else with the pure-Python verifier."""
    try:
        ed = _ed25519()
    except CheckpointError:
        return _ed25519_pure.verify(public_key, message, signature)
    from cryptography.exceptions import InvalidSignature

    try:
        ed.Ed25519PublicKey.from_public_bytes(public_key).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


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
        return _ed25519_verify(self.public_key, message, signature)

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
        return Ed25519Verifier(self.name, _ed25519_public(self.seed))

    @property
    def key_id(self) -> int:
        """The uint32 C2SP key ID."""
        return self.verifier().key_id

    def sign(self, message: bytes) -> bytes:
        """Return the 64-byte Ed25519 signature of ``message``."""
        return _ed25519_sign(self.seed, message)

    def skey(self) -> str:
        """Return the signer key string ``PRIVATE+KEY+<name>+<id>+<base64(0x01 || seed)>``."""
        encoded = base64.b64encode(ED25519_TYPE + self.seed).decode()
        return f"{_PRIVATE_PREFIX}{self.name}+{self.key_id:08x}+{encoded}"


def cosignature_message(text: bytes, timestamp: int) -> bytes:
    """Return the message a ``cosignature/v1`` signs (c2sp.org/tlog-cosignature, "Ed25519
    signed message"): ``cosignature/v1\\n``, ``time <timestamp>\\n``, then the checkpoint's
    note text (ending in a newline, no signature lines).

    Args:
        text: the cosigned note text, UTF-8 bytes.
        timestamp: POSIX seconds, ``0 <= timestamp <= 2**63 - 1``.

    Raises:
        CheckpointError: a timestamp out of range.
    """
    if not isinstance(timestamp, int) or isinstance(timestamp, bool):
        raise CheckpointError(f"cosignature timestamp {timestamp!r} is not an int")
    if not 0 <= timestamp <= _MAX_TIMESTAMP:
        raise CheckpointError(f"cosignature timestamp {timestamp} is not in 0..2**63-1")
    return _COSIGNATURE_HEADER + b"time %d\n" % timestamp + text


def cosignature_timestamp(signature: bytes) -> int:
    """Return the timestamp (POSIX seconds) of a ``cosignature/v1`` signature (key ID removed).

    Raises:
        CheckpointError: the signature is not 8 + 64 bytes, or its timestamp exceeds 2**63 - 1.
    """
    if len(signature) != 72:
        raise CheckpointError(f"a cosignature/v1 signature is 72 bytes, not {len(signature)}")
    timestamp = int.from_bytes(signature[:8], "big")
    if timestamp > _MAX_TIMESTAMP:
        raise CheckpointError(f"cosignature timestamp {timestamp} exceeds 2**63 - 1")
    return timestamp


@dataclass(frozen=True, slots=True)
class CosignatureVerifier:
    """Verifies timestamped Ed25519 cosignatures (type 0x04, ``cosignature/v1``).

    Attributes:
        name: the cosigner (witness) name.
        public_key: its 32-byte RFC 8032 public key.
    """

    name: str
    public_key: bytes

    @property
    def key_id(self) -> int:
        """The uint32 key ID, ``SHA-256(name || 0x0A || 0x04 || public key)[:4]``."""
        return key_id(self.name, COSIGNATURE_TYPE + self.public_key)

    def verify(self, message: bytes, signature: bytes) -> bool:
        """Return whether ``signature`` (8-byte timestamp || 64-byte Ed25519 signature) is a
        valid ``cosignature/v1`` of the note text ``message``."""
        try:
            timestamp = cosignature_timestamp(signature)
        except CheckpointError:
            return False
        signed = cosignature_message(message, timestamp)
        return _ed25519_verify(self.public_key, signed, signature[8:])

    def vkey(self) -> str:
        """Return the verifier key string ``<name>+<id>+<base64(0x04 || public key)>``."""
        encoded = base64.b64encode(COSIGNATURE_TYPE + self.public_key).decode()
        return f"{self.name}+{self.key_id:08x}+{encoded}"


@dataclass(frozen=True, slots=True)
class CosignatureSigner:
    """Signs timestamped Ed25519 cosignatures (type 0x04, ``cosignature/v1``).

    Attributes:
        name: the cosigner (witness) name.
        seed: the 32-byte RFC 8032 private key (seed).
        timestamp: the POSIX time to sign at; ``None`` (the default): the current time,
            read at each ``sign``.
    """

    name: str
    seed: bytes
    timestamp: int | None = None

    def verifier(self) -> CosignatureVerifier:
        """The matching verifier (public key derived from the seed)."""
        return CosignatureVerifier(self.name, _ed25519_public(self.seed))

    @property
    def key_id(self) -> int:
        """The uint32 key ID (type 0x04)."""
        return self.verifier().key_id

    def at(self, timestamp: int) -> CosignatureSigner:
        """Return this signer fixed to sign at ``timestamp`` (POSIX seconds)."""
        return replace(self, timestamp=timestamp)

    def sign(self, message: bytes) -> bytes:
        """Return ``u64 timestamp || Ed25519(cosignature_message(message, timestamp))``.

        Raises:
            CheckpointError: a timestamp out of range.
        """
        timestamp = int(time.time()) if self.timestamp is None else self.timestamp
        signed = cosignature_message(message, timestamp)
        return timestamp.to_bytes(8, "big") + _ed25519_sign(self.seed, signed)

    def skey(self) -> str:
        """Return ``PRIVATE+KEY+<name>+<id>+<base64(0x04 || seed)>``."""
        encoded = base64.b64encode(COSIGNATURE_TYPE + self.seed).decode()
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


def generate_cosigner_key(name: str) -> tuple[str, str]:
    """Generate a witness (cosigner) key; return ``(signer key string, verifier key string)``,
    both of type 0x04.

    Raises:
        CheckpointError: invalid name, or the ``ed25519`` extra is not installed.
    """
    signer = CosignatureSigner(check_key_name(name), secrets.token_bytes(32))
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
    if len(parts) != 3 or not _KEY_ID.match(parts[1]):
        raise CheckpointError(f"malformed {what} string (want <name>+<8 lowercase hex>+<base64>)")
    name = check_key_name(parts[0])
    try:
        raw = base64.b64decode(parts[2], validate=True)
    except (ValueError, binascii.Error) as exc:
        raise CheckpointError(f"malformed {what} string: {exc}") from exc
    if base64.b64encode(raw).decode() != parts[2]:
        raise CheckpointError(f"malformed {what} string: the key is not canonical base64")
    hint = int(parts[1], 16)
    if not raw:
        raise CheckpointError(f"{what} has no key bytes")
    return name, hint, raw


def _check_id(name: str, hint: int, actual: int) -> None:
    if hint != actual:
        raise CheckpointError(f"key id {hint:08x} of key {name!r} does not match its key")


def signer_from_key(text: str) -> Ed25519Signer | CosignatureSigner | HmacKey:
    """Parse a signer key string (``PRIVATE+KEY+...``) into a signer of the key's type.

    Raises:
        CheckpointError: malformed string, unknown type, wrong key length or key id, or an
            Ed25519 key without the ``ed25519`` extra.
    """
    if not isinstance(text, str) or not text.strip().startswith(_PRIVATE_PREFIX):
        raise CheckpointError("a signer key string starts with 'PRIVATE+KEY+'")
    name, hint, raw = _split(text, private=True)
    signer: Ed25519Signer | CosignatureSigner | HmacKey
    if raw[:1] == ED25519_TYPE and len(raw) == 33:
        signer = Ed25519Signer(name, raw[1:])
    elif raw[:1] == COSIGNATURE_TYPE and len(raw) == 33:
        signer = CosignatureSigner(name, raw[1:])
    elif raw.startswith(HMAC_TYPE) and len(raw) - len(HMAC_TYPE) >= _MIN_HMAC_SECRET:
        signer = HmacKey(name, raw[len(HMAC_TYPE) :])
    else:
        raise CheckpointError(f"unsupported signer key type or length for key {name!r}")
    _check_id(name, hint, signer.key_id)
    return signer


def verifier_from_key(text: str) -> Ed25519Verifier | CosignatureVerifier | HmacKey:
    """Parse a verifier key string (type 0x01 or 0x04), or an HMAC key string (its only form,
    ``PRIVATE+KEY+...``: it signs and verifies).

    A signer key of another type (Ed25519, cosigner) is refused: it is a private key, and
    golang.org/x/mod/sumdb/note's verifiers take only verifier key strings; the public
    verifier key is what ``generate_ed25519_key`` (``ledger keygen``) returns beside it.

    Raises:
        CheckpointError: malformed string, unknown type, wrong key length or key id, or a
            private (signer) key other than HMAC.
    """
    if isinstance(text, str) and text.strip().startswith(_PRIVATE_PREFIX):
        signer = signer_from_key(text)
        if isinstance(signer, HmacKey):
            return signer
        raise CheckpointError(
            f"key {signer.name!r} is a private signer key (PRIVATE+KEY+...): give its verifier "
            "key (<name>+<id>+<base64>, printed by keygen) where a verifier key is wanted"
        )
    if not isinstance(text, str):
        raise CheckpointError("a verifier key must be a string")
    name, hint, raw = _split(text, private=False)
    verifier: Ed25519Verifier | CosignatureVerifier
    if raw[:1] == ED25519_TYPE and len(raw) == 33:
        verifier = Ed25519Verifier(name, raw[1:])
    elif raw[:1] == COSIGNATURE_TYPE and len(raw) == 33:
        verifier = CosignatureVerifier(name, raw[1:])
    else:
        raise CheckpointError(f"unsupported verifier key type or length for key {name!r}")
    _check_id(name, hint, verifier.key_id)
    return verifier


def log_signer_from_key(text: str) -> Ed25519Signer | HmacKey:
    """Parse the signer key of a log (what signs checkpoints): Ed25519 (0x01) or HMAC.

    Raises:
        CheckpointError: what ``signer_from_key`` raises, or a witness's cosigner key (type
            0x04): it signs ``cosignature/v1`` cosignatures, not a log's checkpoints.
    """
    signer = signer_from_key(text)
    if isinstance(signer, CosignatureSigner):
        raise CheckpointError(
            f"key {signer.name!r} is a witness's cosigner key (type 0x04), not a log's key"
        )
    return signer


def log_verifier_from_key(text: str) -> Ed25519Verifier | HmacKey:
    """Parse the verifier key of a log (what checks its checkpoints): an Ed25519 (0x01)
    verifier key, or the HMAC key string.

    Raises:
        CheckpointError: what ``verifier_from_key`` raises (a private Ed25519 key among them),
            or a witness's cosigner key (type 0x04): cosignatures are not a log's signature.
    """
    verifier = verifier_from_key(text)
    if isinstance(verifier, CosignatureVerifier):
        raise CheckpointError(
            f"key {verifier.name!r} is a witness's cosigner key (type 0x04), not a log's key"
        )
    return verifier


def cosigner_from_key(text: str) -> CosignatureSigner:
    """Parse a witness signer key: type 0x04, or an Ed25519 (0x01) signer key used as a
    cosigner (its key ID then becomes the 0x04 one).

    Raises:
        CheckpointError: malformed string, another type, or no ``ed25519`` extra.
    """
    signer = signer_from_key(text)
    if isinstance(signer, CosignatureSigner):
        return signer
    if isinstance(signer, Ed25519Signer):
        return CosignatureSigner(signer.name, signer.seed)
    raise CheckpointError(f"key {signer.name!r} is not an Ed25519 key: it cannot cosign")


def cosigner_verifier_from_key(text: str) -> CosignatureVerifier:
    """Parse a witness verifier key: type 0x04, or an Ed25519 (0x01) verifier key taken as the
    witness's public key.

    Raises:
        CheckpointError: malformed string or another type.
    """
    verifier = verifier_from_key(text)
    if isinstance(verifier, CosignatureVerifier):
        return verifier
    if isinstance(verifier, Ed25519Verifier):
        return CosignatureVerifier(verifier.name, verifier.public_key)
    raise CheckpointError(f"key {verifier.name!r} is not an Ed25519 key: it cannot cosign")
