"""The pure-Python Ed25519 verifier (used without ``cryptography``) agrees with OpenSSL's."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import asset_path

from merkle_memory.signed_note._ed25519 import verify

_L = 2**252 + 27742317777372353535851937790883648493
_P = 2**255 - 19

ed25519 = pytest.importorskip(
    "cryptography.hazmat.primitives.asymmetric.ed25519",
    reason="the comparison needs the optional extra 'ed25519'",
)


def _public(seed: bytes) -> bytes:
    from cryptography.hazmat.primitives import serialization

    key = ed25519.Ed25519PrivateKey.from_private_bytes(seed).public_key()
    raw: bytes = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return raw


def _openssl(public: bytes, message: bytes, signature: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature

    try:
        ed25519.Ed25519PublicKey.from_public_bytes(public).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def test_rfc8032_vectors_and_their_bit_flips() -> None:
    """RFC 8032 TEST 1-3 verify; flipping any of 24 bits spread over the signature, the key or
    the message makes them fail."""
    for case in json.loads(asset_path("tlog_upstream", "rfc8032_ed25519.json").read_text())[
        "tests"
    ]:
        public = bytes.fromhex(case["public_key"])
        message = bytes.fromhex(case["message"])
        signature = bytes.fromhex(case["signature"])
        assert verify(public, message, signature)
        for bit in range(0, 512, 23):
            bad = bytearray(signature)
            bad[bit // 8] ^= 1 << (bit % 8)
            assert not verify(public, message, bytes(bad))
        for bit in range(0, 256, 37):
            bad = bytearray(public)
            bad[bit // 8] ^= 1 << (bit % 8)
            assert not verify(bytes(bad), message, signature)
        assert not verify(public, message + b"\x00", signature)


def test_strictness_at_the_edges() -> None:
    """S + L (same value mod L), a non-canonical R or key (y >= p), wrong lengths: refused, as
    OpenSSL refuses them."""
    case = json.loads(asset_path("tlog_upstream", "rfc8032_ed25519.json").read_text())["tests"][0]
    public, signature = bytes.fromhex(case["public_key"]), bytes.fromhex(case["signature"])
    s = int.from_bytes(signature[32:], "little")
    big = signature[:32] + (s + _L).to_bytes(32, "little")
    assert not verify(public, b"", big) and not _openssl(public, b"", big)
    non_canonical = (_P + 1).to_bytes(32, "little")  # y = 1 written as p + 1
    assert not verify(public, b"", non_canonical + signature[32:])
    assert not verify(non_canonical, b"", signature)
    assert not verify(public[:31], b"", signature) and not verify(public, b"", signature[:63])


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.binary(max_size=200), st.integers(0, 511))
def test_agrees_with_openssl(seed: bytes, message: bytes, bit: int) -> None:
    """For random keys and messages both accept the real signature and both refuse it with one
    bit flipped."""
    public = _public(seed)
    signature: bytes = ed25519.Ed25519PrivateKey.from_private_bytes(seed).sign(message)
    assert verify(public, message, signature) and _openssl(public, message, signature)
    bad = bytearray(signature)
    bad[bit // 8] ^= 1 << (bit % 8)
    assert verify(public, message, bytes(bad)) == _openssl(public, message, bytes(bad)) is False


@settings(max_examples=40, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.binary(min_size=64, max_size=64))
def test_random_keys_and_signatures_agree(public: bytes, signature: bytes) -> None:
    """Random 32-byte keys and 64-byte signatures: the verdicts agree (both refuse)."""
    assert verify(public, b"m", signature) == _openssl(public, b"m", signature)
