"""Ed25519 signature verification in pure Python (RFC 8032 section 5.1.7), stdlib only.

Used when the optional ``cryptography`` package is absent, so that anyone can check an
Ed25519-signed (or cosigned) checkpoint or proof bundle with the standard library alone.
Signing stays with ``cryptography`` (the ``ed25519`` extra): this code is not constant-time,
which does not matter for verifying public data but would for handling a private key.

Strict: the public key and ``R`` must be canonical encodings of points on the curve (``y <
p``), ``S`` must be below the group order ``L``, and the check is the cofactorless
``encode([S]B - [k]A) == R`` with ``k = SHA-512(R || A || message) mod L``, as OpenSSL does.
About 5 ms a signature.
"""

from __future__ import annotations

import hashlib

__all__ = ["verify"]

_P = 2**255 - 19
_L = 2**252 + 27742317777372353535851937790883648493
_D = -121665 * pow(121666, _P - 2, _P) % _P
_SQRT_M1 = pow(2, (_P - 1) // 4, _P)

_Point = tuple[int, int, int, int]  # extended coordinates (X, Y, Z, T), x = X/Z, y = Y/Z


def _add(a: _Point, b: _Point) -> _Point:
    """RFC 8032 section 5.1.4 addition (complete: also doubles)."""
    x1, y1, z1, t1 = a
    x2, y2, z2, t2 = b
    p = _P
    aa = (y1 - x1) * (y2 - x2) % p
    bb = (y1 + x1) * (y2 + x2) % p
    cc = t1 * 2 * _D * t2 % p
    dd = z1 * 2 * z2 % p
    e, f, g, h = bb - aa, dd - cc, dd + cc, bb + aa
    return e * f % p, g * h % p, f * g % p, e * h % p


def _multiply(scalar: int, point: _Point) -> _Point:
    result: _Point = (0, 1, 1, 0)  # the neutral element
    while scalar:
        if scalar & 1:
            result = _add(result, point)
        point = _add(point, point)
        scalar >>= 1
    return result


def _decode(data: bytes) -> _Point | None:
    """The point encoded by 32 bytes (RFC 8032 section 5.1.3), or ``None`` when invalid."""
    value = int.from_bytes(data, "little")
    sign = value >> 255
    y = value & ((1 << 255) - 1)
    if y >= _P:
        return None
    u = (y * y - 1) % _P
    v = (_D * y * y + 1) % _P
    x2 = u * pow(v, _P - 2, _P) % _P
    x = pow(x2, (_P + 3) // 8, _P)
    if (x * x - x2) % _P:
        x = x * _SQRT_M1 % _P
        if (x * x - x2) % _P:
            return None
    if x == 0 and sign:
        return None
    if x & 1 != sign:
        x = _P - x
    return x, y, 1, x * y % _P


def _encode(point: _Point) -> bytes:
    x, y, z, _ = point
    inverse = pow(z, _P - 2, _P)
    x, y = x * inverse % _P, y * inverse % _P
    return (y | (x & 1) << 255).to_bytes(32, "little")


_BASE = _decode(bytes.fromhex("5866666666666666666666666666666666666666666666666666666666666666"))


def verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Return whether ``signature`` (64 bytes) is a valid Ed25519 signature of ``message`` by
    ``public_key`` (32 bytes), checked strictly (see the module docstring)."""
    if len(public_key) != 32 or len(signature) != 64 or _BASE is None:
        return False
    point = _decode(public_key)
    if point is None:
        return False
    r_bytes, s = signature[:32], int.from_bytes(signature[32:], "little")
    if s >= _L or _decode(r_bytes) is None:
        return False
    k = int.from_bytes(hashlib.sha512(r_bytes + public_key + message).digest(), "little") % _L
    x, y, z, t = point
    negated = ((_P - x) % _P, y, z, (_P - t) % _P)
    check = _add(_multiply(s, _BASE), _multiply(k, negated))
    return _encode(check) == r_bytes
