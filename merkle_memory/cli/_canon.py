"""``merkle-memory canon``: canonical bytes or digest of a JSON document."""

from __future__ import annotations

import argparse
import hashlib
import sys
from typing import Any

from .. import canonical


def register(groups: Any) -> None:
    """Add the ``canon`` command to the top-level subparsers."""
    p = groups.add_parser(
        "canon",
        help="print the RFC 8785 canonical bytes (or --hash: the SHA-256) of a JSON file",
        description="Read JSON strictly and print its RFC 8785 canonical bytes (no newline), "
        "or with --hash its SHA-256 as 64 lowercase hex characters and a newline.",
        epilog='example: echo \'{"b": 1, "a": [1.0, 2e-7]}\' | merkle-memory canon',
    )
    p.add_argument("file", nargs="?", default="-", help="JSON file, or - for stdin (default)")
    p.add_argument("--hash", action="store_true", help="print the digest instead of the bytes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print canonical bytes or digest; return 0."""
    if args.file == "-":
        data = sys.stdin.buffer.read()
    else:
        with open(args.file, "rb") as handle:
            data = handle.read()
    out = canonical.dumps(canonical.loads(data))
    if args.hash:
        sys.stdout.write(hashlib.sha256(out).hexdigest() + "\n")
    else:
        sys.stdout.buffer.write(out)
    return 0
