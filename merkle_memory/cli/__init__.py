"""The ``merkle-memory`` command line (also ``python -m merkle_memory``).

Results go to stdout, messages to stderr. Exit codes: 0 ok; 1 integrity failure, refusal, or
input that cannot be used (one line ``error: ...``, never a traceback); 2 usage error.

Each command group lives in its own private module and adds its subcommands through a
``register(subparsers)`` function; every handler takes the parsed namespace and returns the
exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence

from .. import __version__
from ..errors import MerkleMemoryError
from . import _bank, _canon, _dag, _dagstore, _ledger, _proofs

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of ``merkle-memory`` with every subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="merkle-memory",
        description="Content-addressed, tamper-evident memory for AI agents.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    groups = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    _canon.register(groups)

    dag = groups.add_parser("dag", help="conversation Merkle DAGs")
    dag_sub = dag.add_subparsers(dest="dag_command", metavar="SUBCOMMAND", required=True)
    _dag.register(dag_sub)
    _dagstore.register(dag_sub)

    ledger = groups.add_parser("ledger", help="hash-chained memory ledgers and their proofs")
    ledger_sub = ledger.add_subparsers(dest="ledger_command", metavar="SUBCOMMAND", required=True)
    _ledger.register(ledger_sub)
    _proofs.register(ledger_sub)

    bank = groups.add_parser("bank", help="content-addressed memory banks")
    bank_sub = bank.add_subparsers(dest="bank_command", metavar="SUBCOMMAND", required=True)
    _bank.register(bank_sub)
    return parser


def _tolerant_streams() -> None:
    """Let stdout/stderr write any text: a lone surrogate from hostile input (a ledger line's
    id, a record's key) comes out as a ``\\udXXX`` escape, which is still valid inside JSON,
    instead of raising ``UnicodeEncodeError`` halfway through a report."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="backslashreplace")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code (0 ok, 1 failure, 2 usage)."""
    _tolerant_streams()
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help/--version exit 0, usage errors exit 2
        return int(exc.code) if isinstance(exc.code, int) else 2
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except MerkleMemoryError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        reason = exc.strerror or str(exc)
        where = f": {exc.filename}" if exc.filename is not None else ""
        print(f"error: {reason}{where}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    return code
