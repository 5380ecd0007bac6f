"""``merkle-memory bank ...``: the content-addressed memory bank (DESIGN sections 5 and 7).

Subcommands: ``add`` (prints the id), ``list``, ``verify`` (exit 1 naming each tampered
file), ``archive``, ``consolidate`` (prints the new id), ``migrate``. ``--json`` output is one
JSON document on stdout; its shapes are the ``to_dict()`` forms of the result classes:

- ``list --json``: ``{"memories": [memory file object + "status" ("active" | "archived") +
  "file" (path relative to the bank)], "skipped": [{"path", "kind", "reason"}]}``.
- ``verify --json``: ``{"ok", "active", "archived", "problems": [{"path", "kind", "reason"}],
  "leftovers": [path], "ledger": {ok, chain, entries, broken_at, reason, sealed, altered,
  missing, unsealed, disputed}}``.
- ``migrate --json``: ``{"migrated": int, "files": [{"path", "new_path", "legacy_id", "id",
  "naive_timestamp", "status", "twin_existed"}], "unparseable": [{"path", "reason"}],
  "skipped": [{"path", "reason"}], "naive_timestamps": [path], "cycles": [[legacy id]],
  "unresolved_links": [{"path", "link"}]}``.

Human output escapes control characters, so a hostile file name or content cannot drive the
terminal.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from ..bank import BankProblem, MemoryBank
from ..memory import Memory, parse_timestamp

__all__ = ["register"]


def _safe(text: str, limit: int | None = None) -> str:
    """``text`` with non-printable characters escaped (``\\n``, ``\\x1b``, ...)."""
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


def _add(args: argparse.Namespace) -> int:
    timestamp = parse_timestamp(args.timestamp) if args.timestamp else datetime.now(UTC)
    memory = Memory(
        type=args.type,
        scope=args.scope,
        content=args.content,
        tags=args.tag,
        timestamp=timestamp,
        source_session=args.source_session,
        links=args.link,
    )
    print(MemoryBank(args.bank).save(memory))
    return 0


def _list(args: argparse.Namespace) -> int:
    which = None if args.all else args.archived
    problems: list[BankProblem] = []
    items = MemoryBank(args.bank).memories(archived=which, problems=problems)
    if args.json:
        _print_json(
            {"memories": [i.to_dict() for i in items], "skipped": [p.to_dict() for p in problems]}
        )
    else:
        for item in items:
            m = item.memory
            print(
                f"{m.id}  {item.status:<8}  {m.hashed_dict()['timestamp']}  {_safe(m.type)}  "
                f"{_safe(m.scope, 24)}  {_safe(m.content, 60)}"
            )
    if problems:
        print(
            f"warning: {len(problems)} file(s) do not verify and are not listed; "
            "run `merkle-memory bank verify`",
            file=sys.stderr,
        )
    return 0


def _verify(args: argparse.Namespace) -> int:
    report = MemoryBank(args.bank).verify()
    if args.json:
        _print_json(report.to_dict())
    else:
        for problem in report.problems:
            print(f"TAMPERED {_safe(problem.path)}: {_safe(problem.reason, 300)}")
        for leftover in report.leftovers:
            print(f"leftover temp file (harmless) {_safe(leftover)}", file=sys.stderr)
        ledger = report.ledger or {}
        state = f"ledger chain {ledger.get('chain')}"
        if ledger.get("broken_at") is not None:
            state += f" at seq {ledger['broken_at']}: {ledger.get('reason')}"
        for key in ("altered", "missing", "unsealed", "disputed"):
            if ledger.get(key):
                state += f"; {key}: {', '.join(ledger[key])}"
        verdict = "ok" if report.ok else "FAILED"
        print(f"{verdict}: {report.active} active, {report.archived} archived; {state}")
    return 0 if report.ok else 1


def _archive(args: argparse.Namespace) -> int:
    print(MemoryBank(args.bank).archive(args.id))
    return 0


def _consolidate(args: argparse.Namespace) -> int:
    bank = MemoryBank(args.bank)
    print(bank.consolidate(args.ids, args.content, type=args.type, scope=args.scope))
    return 0


def _migrate(args: argparse.Namespace) -> int:
    report = MemoryBank(args.bank).migrate()
    for issue in report.unparseable:
        print(
            f"unparseable (left untouched): {_safe(issue.path)}: {_safe(issue.reason, 300)}",
            file=sys.stderr,
        )
    for issue in report.skipped:
        print(
            f"skipped (left untouched): {_safe(issue.path)}: {_safe(issue.reason, 300)}",
            file=sys.stderr,
        )
    for path in report.naive_timestamps:
        print(f"naive timestamp read as UTC: {_safe(path)}", file=sys.stderr)
    for cycle in report.cycles:
        print(f"links in a cycle keep legacy ids: {_safe(', '.join(cycle), 300)}", file=sys.stderr)
    if args.json:
        _print_json(report.to_dict())
    else:
        for f in report.files:
            print(f"{_safe(f.path)} -> {f.new_path}")
        print(f"migrated {report.migrated} file(s)", file=sys.stderr)
    return 0


def register(subparsers: Any) -> None:
    """Add the ``bank`` subcommands to ``subparsers`` (DESIGN section 7)."""
    add = subparsers.add_parser("add", help="save a memory; prints its id")
    add.add_argument("bank", metavar="BANK", help="the bank folder (created if missing)")
    add.add_argument("--type", required=True, help="a slug [a-z0-9_-]+, e.g. fact")
    add.add_argument("--scope", required=True, help="e.g. project, user")
    add.add_argument("--content", required=True, help="the memory text (kept byte-exact)")
    add.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
    add.add_argument("--link", action="append", default=[], help="a URI (repeatable)")
    add.add_argument("--source-session", default=None, help="the session it came from")
    add.add_argument("--timestamp", default=None, help="ISO 8601 with a UTC offset (default: now)")
    add.set_defaults(func=_add)

    lst = subparsers.add_parser("list", help="list memories that verify")
    lst.add_argument("bank", metavar="BANK")
    which = lst.add_mutually_exclusive_group()
    which.add_argument("--archived", action="store_true", help="archived memories only")
    which.add_argument("--all", action="store_true", help="active and archived memories")
    lst.add_argument("--json", action="store_true", help="one JSON document on stdout")
    lst.set_defaults(func=_list)

    ver = subparsers.add_parser("verify", help="check every memory file and the ledger")
    ver.add_argument("bank", metavar="BANK")
    ver.add_argument("--json", action="store_true", help="one JSON document on stdout")
    ver.set_defaults(func=_verify)

    arc = subparsers.add_parser("archive", help="move a memory into memories/archive/")
    arc.add_argument("bank", metavar="BANK")
    arc.add_argument("id", metavar="ID", help="memory id, 64-char lowercase hex")
    arc.set_defaults(func=_archive)

    con = subparsers.add_parser(
        "consolidate", help="write one memory linking to ID..., then archive them"
    )
    con.add_argument("bank", metavar="BANK")
    con.add_argument("ids", metavar="ID", nargs="+", help="ids of the memories to consolidate")
    con.add_argument("--content", required=True, help="the consolidated text")
    con.add_argument("--type", default=None, help="default: the originals' common type")
    con.add_argument("--scope", default=None, help="default: the originals' common scope")
    con.set_defaults(func=_consolidate)

    mig = subparsers.add_parser("migrate", help="rewrite legacy memory files content-addressed")
    mig.add_argument("bank", metavar="BANK")
    mig.add_argument("--json", action="store_true", help="one JSON document on stdout")
    mig.set_defaults(func=_migrate)
