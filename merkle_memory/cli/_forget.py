"""Forgetting and testimony modes on the command line (issue 20, issue 16 item 8).

- ``ledger forget TENANT ID --reason TEXT [--json]``: erase a record's file and seal a
  tombstone (``Tenant.forget``; ``PostgresTenant.forget`` for a ``postgresql://`` URL).
  Prints ``forgotten ID: seq N, tombstone SHA256`` (or, with
  ``--json``, the receipt: ``{"memory_id", "seq", "content_sha256", "removed",
  "already_forgotten", "tombstone": {...} | null, "entry": {...}}``).
- ``ledger init TENANT [--testimony MODE | --mnemo | --salted] [--json]``: make a tenant and
  record its testimony mode (``Tenant.initialize``); prints the mode (``{"tenant", "testimony"}``
  with ``--json``).
- ``bank forget BANK ID --reason TEXT [--json]``: the same for a memory bank
  (``MemoryBank.forget``).
- ``dag forget --store DB NODE [--reason TEXT] [--json]``: prune a node's content and
  delete every ``dag sync`` archived version of a file whose import gives it
  (``transcripts.forget_node``); NODE may be a unique prefix. Prints the node's full hash
  and, on stderr, each purged version (``{"hash", "pruned", "already_pruned",
  "purged_versions": [{"path", "version"}]}`` with ``--json``).

Exit 0 on success (forgetting something already forgotten included), 1 when refused (no such
record, memory or node; a broken chain; a salted tenant asked for another mode), 2 for usage
errors. :func:`add_testimony_arguments` and :func:`testimony_from_args` give any command that
creates or saves a tenant the same ``--testimony`` / ``--mnemo`` / ``--salted`` flags.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Final

from .._pg import is_url
from ..bank import MemoryBank
from ..dag.store import open_store
from ..errors import TenantError
from ..ledger import ForgetReceipt, open_tenant
from ..ledger.records import TESTIMONY_MODES
from ..transcripts import forget_node
from ._output import must_exist, note, one_line, print_json

__all__ = [
    "add_testimony_arguments",
    "register_bank",
    "register_dag",
    "register_ledger",
    "testimony_from_args",
]

_REASON_HELP: Final = (
    "why (kept in the tombstone, at most 4096 characters: never the content itself)"
)


def _reason(text: str) -> str:
    """``--reason``'s type: a tombstone says why, so an empty (or blank) reason is a usage
    error (exit 2)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("must not be empty: say why it is forgotten")
    return text


def add_testimony_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--testimony MODE`` and its shorthands ``--mnemo`` and ``--salted`` (one of them
    at most; none keeps the tenant's recorded or implied mode)."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--testimony",
        choices=TESTIMONY_MODES,
        default=None,
        help="how records are sealed: rfc8785 (the default of a new tenant), mnemo "
        "(mnemo-cortex's own formula), salted (a random salt per record, kept in its file)",
    )
    group.add_argument(
        "--mnemo",
        dest="testimony",
        action="store_const",
        const="mnemo",
        help="same as --testimony mnemo",
    )
    group.add_argument(
        "--salted",
        dest="testimony",
        action="store_const",
        const="salted",
        help="same as --testimony salted",
    )


def testimony_from_args(args: argparse.Namespace) -> str | None:
    """The mode asked for by :func:`add_testimony_arguments`'s flags, or ``None``."""
    mode = getattr(args, "testimony", None)
    return mode if isinstance(mode, str) else None


def _receipt_text(receipt: ForgetReceipt) -> str:
    tail = " (already forgotten" + (", file removed again)" if receipt.removed else ")")
    return one_line(
        f"forgotten {receipt.memory_id}: seq {receipt.entry.seq}, tombstone "
        f"{receipt.entry.content_sha256}" + (tail if receipt.already_forgotten else "")
    )


def _show(args: argparse.Namespace, receipt: ForgetReceipt) -> int:
    if args.json:
        print_json(receipt.to_dict())
    else:
        print(_receipt_text(receipt))
    return 0


def _ledger_forget(args: argparse.Namespace) -> int:
    must_exist(args.tenant)
    if not is_url(args.tenant) and not Path(args.tenant).is_dir():
        raise TenantError("not a tenant folder", args.tenant)
    tenant = open_tenant(args.tenant)
    receipt = tenant.forget(args.id, args.reason, force=args.force)
    if receipt.was_altered:
        note(
            args,
            f"warning: {one_line(receipt.memory_id)} was altered (its file did not match its "
            "entry); forgotten with --force: the tombstone retires the sealed digest",
        )
    return _show(args, receipt)


def _ledger_init(args: argparse.Namespace) -> int:
    wanted = testimony_from_args(args)
    tenant = open_tenant(args.tenant, testimony=wanted)
    mode = tenant.initialize()
    if args.json:
        print_json({"tenant": tenant.name, "testimony": mode})
    else:
        print(mode)
    return 0


def _bank_forget(args: argparse.Namespace) -> int:
    return _show(args, MemoryBank(args.bank).forget(args.id, args.reason))


def _dag_forget(args: argparse.Namespace) -> int:
    with open_store(args.store, create=False) as store:
        target = store.resolve(args.node.lower())
        result = forget_node(store, target, args.reason)
    purged = [{"path": path, "version": version} for path, version in result.purged]
    if args.json:
        print_json(
            {
                "hash": target,
                "pruned": True,
                "already_pruned": not result.pruned,
                "purged_versions": purged,
            }
        )
    else:
        print(target)
        if not result.pruned:
            note(args, f"{target} was already pruned")
        for path, version in result.purged:
            note(args, one_line(f"purged archived {path} version {version}"))
    return 0


def register_ledger(subparsers: Any) -> None:
    """Add ``ledger forget`` and ``ledger init``."""
    forget = subparsers.add_parser(
        "forget",
        help="erase a record's file and seal a tombstone (op: forget)",
        description="Forget a record: its tombstone (id, reason, time, the testimony it "
        "retires) is written, sealed by an op: forget entry, and only then is "
        "memory/ID.json removed. Verify then reports the id as forgotten (exit 0); a file "
        "put back later is reported as reappeared. Forgetting again is harmless. Refused "
        "(exit 1, nothing changed) when the chain is broken, and for an altered record "
        "unless --force. A postgresql://...#tenant URL forgets in the database: the "
        "tombstone row, the record row's removal and the entry commit in one transaction.",
        epilog="examples:\n"
        '  merkle-memory ledger forget agents/cc note-2 --reason "user asked (ticket 41)"\n'
        "  merkle-memory ledger forget 'postgresql:///agents?host=/run/pg#cc' note-2 "
        "--reason gdpr --json\n"
        "  merkle-memory ledger prove agents/cc --memory-id note-2 --json > receipt.json",
    )
    forget.add_argument(
        "tenant", metavar="TENANT", help="the tenant folder, or postgresql://...#tenant"
    )
    forget.add_argument("id", metavar="ID", help="the record id")
    forget.add_argument("--reason", required=True, type=_reason, help=_REASON_HELP)
    forget.add_argument(
        "--force",
        action="store_true",
        help="forget a record verify reads altered (refused without it: removing the file "
        "erases the evidence of the change)",
    )
    forget.add_argument("--json", action="store_true", help="print the receipt as JSON")
    forget.set_defaults(func=_ledger_forget)

    init = subparsers.add_parser(
        "init",
        help="make a tenant and record how it seals testimony",
        description="Make TENANT a tenant (folder, memory/, ledger.jsonl) and record its "
        "testimony mode in TENANT/testimony.json; print the mode. Without a flag a tenant "
        "keeps its mode: mnemo when mnemo-cortex wrote its ledger, else rfc8785. A salted "
        "tenant stays salted, and a tenant whose ledger holds entries cannot become salted "
        "(exit 1). A postgresql://...#tenant URL creates the tenant in the database and "
        "records its mode there.",
        epilog="examples:\n"
        "  merkle-memory ledger init agents/cc --salted\n"
        "  merkle-memory ledger init agents/rocky --mnemo --json\n"
        "  merkle-memory ledger init 'postgresql:///agents?host=/run/pg#cc' --salted",
    )
    init.add_argument(
        "tenant", metavar="TENANT", help="the tenant folder, or postgresql://...#tenant"
    )
    add_testimony_arguments(init)
    init.add_argument("--json", action="store_true", help="print one JSON document")
    init.set_defaults(func=_ledger_init)


def register_bank(subparsers: Any) -> None:
    """Add ``bank forget``."""
    forget = subparsers.add_parser(
        "forget",
        help="erase a memory's file and seal a tombstone in the bank's ledger",
        description="Forget a memory (active or archived): its tombstone is sealed by an "
        "op: forget entry, then the file is removed. Verify reports the id as forgotten and "
        "links to it as forgotten links (exit 0).",
        epilog="examples:\n"
        '  merkle-memory bank forget bank "$ID" --reason "user asked"\n'
        '  merkle-memory bank forget bank "$ID" --reason gdpr --json',
    )
    forget.add_argument("bank", metavar="BANK", help="the bank folder")
    forget.add_argument("id", metavar="ID", help="memory id, 64-char lowercase hex")
    forget.add_argument("--reason", required=True, type=_reason, help=_REASON_HELP)
    forget.add_argument("--json", action="store_true", help="print the receipt as JSON")
    forget.set_defaults(func=_bank_forget)


def register_dag(subparsers: Any) -> None:
    """Add ``dag forget``."""
    forget = subparsers.add_parser(
        "forget",
        help="replace a node's content by nothing, keeping its id and links",
        description="Prune a node of a node store (a SQLite file or a postgresql:// URL): its "
        "content blocks are removed (SQLite: the freed bytes overwritten, the WAL truncated; "
        "PostgreSQL: the old row version stays in the table's files until VACUUM), its "
        "hash, parent link, role and "
        "metadata kept; descendants keep their ids. dag verify then lists it as pruned "
        "(exit 0). In a store that archives transcripts (dag sync), every archived version "
        "of a file whose import gives the node is deleted in the same transaction (dag "
        "restore of it then exits 1, naming the forget); the transcript files themselves are "
        "not touched. Print the node's full hash.",
        epilog="examples:\n"
        "  merkle-memory dag forget --store dag.db 3f2a9c\n"
        '  merkle-memory dag forget --store dag.db 3f2a9c --reason "pasted a password" --json\n'
        "  merkle-memory dag forget --store 'postgresql:///agents?host=/run/pg' 3f2a9c",
    )
    forget.add_argument("node", metavar="NODE", help="node hash, or a unique prefix (>= 4 hex)")
    forget.add_argument(
        "--store", required=True, metavar="DB", help="node store: SQLite file or postgresql:// URL"
    )
    forget.add_argument("--reason", default="", help="why (kept beside the pruned marker)")
    forget.add_argument("--json", action="store_true", help="print one JSON document")
    forget.set_defaults(func=_dag_forget)
