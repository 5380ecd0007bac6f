"""The ``merkle-memory`` command line (also ``python -m merkle_memory``).

Results go to stdout, messages and progress to stderr (see ``_output``: ``-q/--quiet``
silences messages and progress, the progress line is drawn only on a terminal). Exit codes:
0 ok; 1 integrity failure, refusal, or input that cannot be used (one line ``error: ...``,
never a traceback); 2 usage error; 130 interrupted. A closed stdout pipe ends quietly.

Each command group lives in its own private module and adds its subcommands through a
``register(subparsers)`` function (given a ``CommandGroup``, which adds ``-q`` to each
subcommand and keeps epilog examples' line breaks); every handler takes the parsed namespace
and returns the exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ..errors import LedgerRollbackError, MerkleMemoryError
from . import (
    _bank,
    _canon,
    _dag,
    _dagstore,
    _dagsync,
    _forget,
    _ledger,
    _ledger_write,
    _proofs,
    _tlog,
    _transfer,
)
from ._output import (
    CommandGroup,
    HelpFormatter,
    describe_oserror,
    error,
    is_quiet,
    one_line,
    rollback_way_out,
)

__all__ = ["build_parser", "main"]


_TOP_EPILOG = """\
examples:
  merkle-memory canon --hash value.json
  merkle-memory dag import session.jsonl --store dag.db
  merkle-memory ledger verify --all ~/.agent --json

Run `merkle-memory COMMAND --help` for the options and examples of a command.
Exit codes: 0 ok; 1 integrity failure, refusal or unusable input (one line
`error: ...` on stderr); 2 usage error."""

_DAG_EPILOG = """\
examples:
  merkle-memory dag import session.jsonl other.jsonl --json
  merkle-memory dag show 3f2a --store dag.db
  merkle-memory dag sync ~/.claude/projects --store archive.db"""

_LEDGER_EPILOG = """\
examples:
  merkle-memory ledger verify agents/cc
  merkle-memory ledger save agents/cc note-2.json
  merkle-memory ledger prove agents/cc --memory-id note-1 --json > proof.json"""

_WITNESS_EPILOG = """\
examples:
  merkle-memory witness serve --db witness.db --key witness.key --log cc.vkey \\
      --listen 127.0.0.1:7380"""

_BANK_EPILOG = """\
examples:
  merkle-memory bank add bank --type fact --scope project --content "Tests use pytest"
  merkle-memory bank list bank --json
  merkle-memory bank verify bank"""


def _group(groups: Any, name: str, text: str, description: str, epilog: str) -> CommandGroup:
    """Add the command group ``name``; return its subcommands wrapped in a CommandGroup."""
    parser = groups.add_parser(
        name,
        help=text,
        description=description,
        epilog=epilog,
        formatter_class=HelpFormatter,
    )
    sub = parser.add_subparsers(dest=f"{name}_command", metavar="SUBCOMMAND", required=True)
    return CommandGroup(sub)


def build_parser() -> argparse.ArgumentParser:
    """Build the argument parser of ``merkle-memory`` with every subcommand registered.

    Every subcommand accepts ``-q/--quiet`` (also accepted before the command name) and has
    a description and an epilog with examples.
    """
    parser = argparse.ArgumentParser(
        prog="merkle-memory",
        description="Content-addressed, tamper-evident memory for AI agents: canonical JSON, "
        "conversation Merkle DAGs, hash-chained ledgers with proofs, memory banks.",
        epilog=_TOP_EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no messages or progress on stderr (results and error lines still appear)",
    )
    groups = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    _canon.register(CommandGroup(groups))

    dag = _group(
        groups,
        "dag",
        "conversation Merkle DAGs",
        "Import agent transcripts into a conversation Merkle DAG, store it in SQLite, show a "
        "node's ancestry, verify a store and forget a node's content; sync transcript "
        "folders into an archiving store, list and restore the archived files.",
        _DAG_EPILOG,
    )
    _dag.register(dag)
    _dagstore.register(dag)
    _forget.register_dag(dag)
    _dagsync.register(dag)

    ledger = _group(
        groups,
        "ledger",
        "hash-chained memory ledgers and their proofs",
        "Verify, seal and save tenants' hash-chained ledgers (folders or "
        "postgresql://...#tenant), recover from a refused rollback; forget records with a "
        "sealed tombstone; prove inclusion and consistency; sign and check checkpoints; move "
        "tenants between a database and folders.",
        _LEDGER_EPILOG,
    )
    _ledger.register(ledger)
    _ledger_write.register(ledger)
    _proofs.register(ledger)
    _transfer.register(ledger)
    _forget.register_ledger(ledger)
    _tlog.register_ledger(ledger)

    witness = _group(
        groups,
        "witness",
        "a C2SP transparency-log witness",
        "Run a witness that cosigns only consistent checkpoints of the logs it knows "
        "(C2SP tlog-witness, cosignature/v1), keeping its state in SQLite.",
        _WITNESS_EPILOG,
    )
    _tlog.register_witness(witness)

    bank = _group(
        groups,
        "bank",
        "content-addressed memory banks",
        "Save, list, verify, archive, consolidate, migrate, seal and forget the memories of "
        "a content-addressed memory bank (EP-0106).",
        _BANK_EPILOG,
    )
    _bank.register(bank)
    _forget.register_bank(bank)
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


class _StderrWarnings(logging.Handler):
    """Show the library's log records (e.g. a torn tail quarantined) as one ``warning: ...``
    line each on the current stderr; ``-q`` silences them. Errors are raised, not logged."""

    def __init__(self, quiet: bool) -> None:
        super().__init__(logging.CRITICAL + 1 if quiet else logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = one_line(record.getMessage())
        except Exception:  # a malformed record must not break the command
            message = one_line(str(record.msg))
        print(f"warning: {message}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line and return its exit code (0 ok, 1 failure, 2 usage, 130
    interrupted)."""
    try:
        return _main(argv)
    except KeyboardInterrupt:  # while the parser is built, or the options read
        error("interrupted")
        return 130


def _main(argv: Sequence[str] | None) -> int:
    _tolerant_streams()
    parser = build_parser()
    try:
        args, extras = parser.parse_known_args(argv)
        if extras:  # an unknown flag: the usage of the subcommand it was given to
            leaf: argparse.ArgumentParser = getattr(args, "command_parser", parser)
            leaf.error(f"unrecognized arguments: {' '.join(extras)}")
    except SystemExit as exc:  # argparse: --help/--version exit 0, usage errors exit 2
        return int(exc.code) if isinstance(exc.code, int) else 2
    handler = _StderrWarnings(quiet=is_quiet(args))
    library_log = logging.getLogger("merkle_memory")
    library_log.addHandler(handler)
    propagate, library_log.propagate = library_log.propagate, False
    try:
        code: int = args.func(args)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except MerkleMemoryError as exc:
        message = str(exc)
        tenant = getattr(args, "tenant", None)
        if isinstance(exc, LedgerRollbackError) and tenant and "ledger recover" not in message:
            # e.g. a proof refused because the sidecar covers more than the ledger holds
            message += rollback_way_out(str(tenant))
        error(message)
        return 1
    except OSError as exc:
        error(describe_oserror(exc))
        return 1
    except KeyboardInterrupt:
        error("interrupted")
        return 130
    finally:
        library_log.removeHandler(handler)
        library_log.propagate = propagate
    return code
