"""``merkle-memory canon``: canonical bytes or digest of a JSON document (DESIGN section 7).

``canon [FILE|-] [--hash]`` reads JSON strictly (:func:`merkle_memory.canonical.loads`) and
prints its RFC 8785 bytes with no trailing newline, or with ``--hash`` their SHA-256 as
64-char lowercase hex and a newline. Exit 1 for a missing file, input that is not JSON or a
value outside the canonical domain. No ``--json``: the result is the bytes or the digest.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from typing import Any

from .. import canonical
from ._output import write_stdout

__all__ = ["register"]

_EPILOG = """\
examples:
  echo '{"b": 1, "a": [1.0, 2e-7]}' | merkle-memory canon       # {"a":[1,2e-7],"b":1}
  merkle-memory canon --hash memory.json
  merkle-memory canon memory.json > memory.canonical.json"""


def register(groups: Any) -> None:
    """Add the ``canon`` command to the top-level subparsers."""
    p = groups.add_parser(
        "canon",
        help="print the RFC 8785 canonical bytes (or --hash: the SHA-256) of a JSON file",
        description="Read JSON strictly (duplicate keys, NaN, lone surrogates and integers "
        "that are not exact doubles are refused) and print its RFC 8785 canonical bytes with "
        "no trailing newline, or with --hash their SHA-256 as 64 lowercase hex characters "
        "and a newline.",
        epilog=_EPILOG,
    )
    p.add_argument(
        "file", nargs="?", default="-", metavar="FILE", help="JSON file, or - for stdin (default)"
    )
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
    write_stdout(hashlib.sha256(out).hexdigest() + "\n" if args.hash else out)
    return 0
