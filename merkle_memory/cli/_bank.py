"""``merkle-memory bank ...``: the content-addressed memory bank (DESIGN sections 5 and 7).

Subcommands: ``add`` (prints the id), ``list``, ``verify`` (exit 1 naming each tampered
file), ``archive``, ``consolidate`` (prints the new id), ``migrate``, ``seal`` (prints the ids
adopted; exit 1 when refused on a broken chain, or with ``error: bank not ok after sealing: N
altered, M missing`` when the ledger still reports an altered or missing memory after
sealing). Every command but ``add`` refuses a folder that is not a bank (no ``memories/`` and
no ``ledger.jsonl``: ``error: no memory bank at BANK``) and creates nothing; ``add`` creates
the bank folder, never its missing parents. A text argument (``--content``, ``--type``, an
``ID``...) that is not valid UTF-8 is refused: ``error: --content is not valid UTF-8``.
``--json`` output is one JSON document on stdout; its shapes are the
``to_dict()`` forms of the result classes:

- ``list --json``: ``{"memories": [memory file object + "status" ("active" | "archived") +
  "file" (path relative to the bank)], "skipped": [{"path", "kind", "reason"}]}``.
- ``verify --json``: ``{"ok", "active", "archived", "problems": [{"path", "kind", "reason"}],
  "leftovers": [path], "ledger": {ok, chain, entries, broken_at, reason, sealed, altered,
  missing, unsealed, disputed}}``; ``ledger`` is ``null`` when ``ledger.jsonl`` or
  ``ledger.head`` is not a regular file (then listed in ``problems``, never opened). When
  verify is refused (not a bank, a symlinked ``ledger.jsonl``), the document has ``ok``
  false, zero counts, empty lists, ``ledger`` null and ``"error"`` holding the message.
- ``migrate --json``: ``{"migrated": int, "files": [{"path", "new_path", "new_status"
  ("active" | "archived"), "legacy_id", "id", "naive_timestamp", "status", "twin_existed"}],
  "unparseable": [{"path", "reason"}], "skipped": [{"path", "reason"}], "naive_timestamps":
  [path], "cycles": [[legacy id]], "unresolved_links": [{"path", "link"}]}``.
- ``seal --json``: ``{"sealed_now": int, "sealed_ids": [id], "ledger": {...as in verify}}``;
  when refused, ``sealed_now`` is 0, ``ledger`` is the report that found the break, and
  ``"error"`` holds the message.

Human output escapes control characters, so a hostile file name or content cannot drive the
terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from ..bank import BankProblem, BankReport, MemoryBank
from ..bank.memory import parse_timestamp
from ..errors import BankError, LedgerBrokenError
from ..ledger import VerifyReport
from ._output import (
    Progress,
    describe_oserror,
    error,
    hex_prefix,
    must_exist,
    note,
    print_json,
)

__all__ = ["register"]


def _safe(text: str, limit: int | None = None) -> str:
    """``text`` with non-printable characters escaped (``\\n``, ``\\x1b``, ...)."""
    if limit is not None and len(text) > limit:
        text = text[:limit] + "…"
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


def _print_json(value: Any) -> None:
    print_json(value)


#: Text arguments checked for valid UTF-8, and how the error names them. The BANK path is not
#: checked: a file name may be any bytes.
_TEXT_ARGS: dict[str, str] = {
    "type": "--type",
    "scope": "--scope",
    "content": "--content",
    "tag": "--tag",
    "link": "--link",
    "source_session": "--source-session",
    "timestamp": "--timestamp",
    "id": "ID",
    "ids": "ID",
}


def _not_utf8(args: argparse.Namespace) -> str | None:
    """The name of the first text argument that is not valid UTF-8, or ``None``.

    Python decodes command-line bytes that are not UTF-8 with ``surrogateescape``, so such an
    argument holds lone surrogates (U+DC80..U+DCFF); no valid text holds any surrogate.
    """
    for dest, name in _TEXT_ARGS.items():
        value = getattr(args, dest, None)
        values = value if isinstance(value, list) else [value]
        for text in values:
            if isinstance(text, str) and any("\ud800" <= ch <= "\udfff" for ch in text):
                return name
    return None


def _utf8_ok(args: argparse.Namespace) -> bool:
    """False (after printing ``error: NAME is not valid UTF-8``) when an argument is not."""
    name = _not_utf8(args)
    if name is not None:
        error(f"{name} is not valid UTF-8")
    return name is None


def _add(args: argparse.Namespace) -> int:
    if not _utf8_ok(args):
        return 1
    result = MemoryBank(args.bank, salted=True if args.salted else None).add(
        args.type,
        args.scope,
        args.content,
        tags=args.tag,
        source_session=args.source_session,
        links=args.link,
        timestamp=parse_timestamp(args.timestamp) if args.timestamp else None,
    )
    if args.json:
        _print_json(result.to_dict())
    else:
        print(result.id)
    if not result.created:
        note(args, f"already in the bank ({result.stored.status}): {_safe(result.stored.path)}")
    return 0


def _list(args: argparse.Namespace) -> int:
    must_exist(args.bank)
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
    back = [p for p in problems if p.kind == "reappeared"]
    problems = [p for p in problems if p.kind != "reappeared"]
    if problems:
        note(
            args,
            f"warning: {len(problems)} file(s) do not verify and are not listed; "
            "run `merkle-memory bank verify`" + _migrate_hint(problems, args.bank),
        )
    if back:
        error(
            f"{len(back)} forgotten memor{'y' if len(back) == 1 else 'ies'} reappeared and "
            f"{'is' if len(back) == 1 else 'are'} not listed: {_safe(back[0].path)}"
            + (f" (+{len(back) - 1} more)" if len(back) > 1 else "")
            + f"; forget again to remove: merkle-memory bank forget {_safe(args.bank)} ID"
        )
        return 1
    return 0


def _ledger_failures(ledger: dict[str, Any]) -> str:
    """``" (1 reappeared, 2 altered)"``: the failing verdicts of a bank's ledger report."""
    parts = [
        f"{len(ledger[key])} {key}"
        for key in ("reappeared", "altered", "missing")
        if ledger.get(key)
    ]
    if ledger.get("chain") == "broken":
        parts.insert(0, f"chain broken at seq {ledger.get('broken_at')}")
    return f" ({', '.join(parts)})" if parts else ""


def _migrate_hint(problems: Sequence[BankProblem], bank: str) -> str:
    """``" (N legacy: run `merkle-memory bank migrate BANK`)"`` when some problems are legacy
    memory files, else ``""``."""
    legacy = sum(1 for problem in problems if problem.kind == "legacy")
    if not legacy:
        return ""
    return f" ({legacy} legacy: run `merkle-memory bank migrate {_safe(bank)}`)"


def _verify(args: argparse.Namespace) -> int:
    try:
        must_exist(args.bank)
        with Progress.for_args(args, "bank verify") as progress:
            progress.show(args.bank)
            report = MemoryBank(args.bank).verify(progress=progress.reporter())
    except (BankError, FileNotFoundError) as exc:
        if args.json:  # refused (missing, not a bank, a symlinked ledger): still one document
            text = describe_oserror(exc) if isinstance(exc, OSError) else str(exc)
            _print_json({**BankReport(0, 0).to_dict(), "ok": False, "error": text})
        raise
    if args.json:
        _print_json(report.to_dict())
    else:
        for problem in report.problems:
            label = "LEGACY" if problem.kind == "legacy" else "TAMPERED"
            print(f"{label} {_safe(problem.path)}: {_safe(problem.reason, 300)}")
        for leftover in report.leftovers:
            note(args, f"leftover temp file (harmless) {_safe(leftover)}")
        for path, link in report.forgotten_links:
            print(f"forgotten link {_safe(path)}: {_safe(link)} (that memory was forgotten)")
        state = _ledger_state(report.ledger or {})
        verdict = "ok" if report.ok else "FAILED"
        print(f"{verdict}: {report.active} active, {report.archived} archived; {state}")
    if not report.ok:
        ledger_ok = (report.ledger or {}).get("ok", True)
        error(
            f"bank failed verification: {len(report.problems)} file(s) do not verify"
            + _migrate_hint(report.problems, args.bank)
            + (
                ""
                if ledger_ok
                else "; the ledger is not ok" + _ledger_failures(report.ledger or {})
            )
        )
    return 0 if report.ok else 1


def _archive(args: argparse.Namespace) -> int:
    must_exist(args.bank)
    bank = MemoryBank(args.bank)
    memory_id = bank.resolve(args.id)
    path = bank.archive(memory_id)
    if args.json:
        _print_json({"id": memory_id, "status": "archived", "file": path})
    else:
        print(path)
    return 0


def _consolidate(args: argparse.Namespace) -> int:
    if not _utf8_ok(args):
        return 1
    must_exist(args.bank)
    bank = MemoryBank(args.bank)
    originals = sorted({bank.resolve(prefix) for prefix in args.ids})
    new_id = bank.consolidate(originals, args.content, type=args.type, scope=args.scope)
    if args.json:
        _print_json(
            {
                "id": new_id,
                "file": bank.locate(new_id).path,
                "originals": [{"id": mid, "file": bank.locate(mid).path} for mid in originals],
            }
        )
    else:
        print(new_id)
    return 0


def _migrate(args: argparse.Namespace) -> int:
    must_exist(args.bank)
    with Progress.for_args(args, "bank migrate") as progress:
        progress.show(args.bank)
        report = MemoryBank(args.bank).migrate(progress=progress.reporter())
    for issue in report.unparseable:
        note(args, f"unparseable (left untouched): {_safe(issue.path)}: {_safe(issue.reason, 300)}")
    for issue in report.skipped:
        note(args, f"skipped (left untouched): {_safe(issue.path)}: {_safe(issue.reason, 300)}")
    for path in report.naive_timestamps:
        note(args, f"naive timestamp read as UTC: {_safe(path)}")
    for cycle in report.cycles:
        note(args, f"warning: links in a cycle keep legacy ids: {_safe(', '.join(cycle), 300)}")
    for issue in report.unresolved_links:
        note(
            args,
            f"warning: unresolved link kept in {_safe(issue.path)}: {_safe(issue.reason, 300)}",
        )
    if args.json:
        _print_json(report.to_dict())
    else:
        for f in report.files:
            status = "" if f.status is None else f"; legacy status {_safe(f.status, 40)!r}"
            print(f"{_safe(f.path)} -> {f.new_path} ({f.new_status}{status})")
        note(args, f"migrated {report.migrated} file(s)")
    return 0


def _ledger_state(ledger: dict[str, Any]) -> str:
    """``ledger chain <chain>[ at seq N: reason][; altered: ...]...`` for human output."""
    if not ledger:
        return "ledger not read"
    state = f"ledger chain {ledger.get('chain')}"
    if ledger.get("broken_at") is not None:
        state += f" at seq {ledger['broken_at']}: {ledger.get('reason')}"
    for key in ("altered", "missing", "unsealed", "disputed", "forgotten", "reappeared"):
        if ledger.get(key):
            state += f"; {key}: {', '.join(ledger[key])}"
    return state


def _seal_json(sealed_ids: Sequence[str], ledger: dict[str, Any]) -> dict[str, Any]:
    """``bank seal --json``: ``{"sealed_now", "sealed_ids", "ledger"}``."""
    return {"sealed_now": len(sealed_ids), "sealed_ids": list(sealed_ids), "ledger": ledger}


def _seal(args: argparse.Namespace) -> int:
    must_exist(args.bank)
    problems: list[BankProblem] = []
    try:
        with Progress.for_args(args, "bank seal") as progress:
            progress.show(args.bank)
            result = MemoryBank(args.bank).seal(problems=problems, progress=progress.reporter())
    except LedgerBrokenError as exc:
        if args.json and isinstance(exc.report, VerifyReport):
            _print_json({**_seal_json((), exc.report.to_dict()), "error": str(exc)})
        print(f"error: {_safe(str(exc), 300)}", file=sys.stderr)
        return 1
    ledger = result.report.to_dict()
    if args.json:
        _print_json(_seal_json(result.sealed_ids, ledger))
    else:
        for memory_id in result.sealed_ids:
            print(memory_id)
        verdict = "sealed" if result.ok else "FAILED: sealed"
        note(args, f"{verdict} {result.sealed_now} now; {_ledger_state(ledger)}")
    if problems:
        note(
            args,
            f"warning: {len(problems)} file(s) do not verify and were not sealed; "
            "run `merkle-memory bank verify`" + _migrate_hint(problems, args.bank),
        )
    if not result.ok:
        error(_not_ok_after_sealing(ledger))
    return 0 if result.ok else 1


def _not_ok_after_sealing(ledger: dict[str, Any]) -> str:
    """``bank not ok after sealing: N altered, M missing`` (plus the chain when not intact)."""
    altered = len(ledger.get("altered") or ())
    missing = len(ledger.get("missing") or ())
    message = f"bank not ok after sealing: {altered} altered, {missing} missing"
    if ledger.get("chain") not in ("intact", "empty"):
        message += f"; {_ledger_state(ledger)}"
    return message


_TEXTS: dict[str, dict[str, str]] = {
    "add": {
        "description": "Save a memory in the bank (the bank folder is created if missing; "
        "its parent folder must exist), seal it in the bank's ledger and print its id "
        "(64-char hex). Saving the same memory again writes nothing and prints the same id: "
        "the same type, scope, content, tags, links and source session, whatever its "
        "timestamp (without --timestamp the bank is searched for it first; with --timestamp "
        "the time is part of the memory).",
        "epilog": "examples:\n"
        '  merkle-memory bank add bank --type fact --scope project --content "Tests use pytest"\n'
        '  merkle-memory bank add bank --type decision --scope user --content "Use French" \\\n'
        "      --tag lang --link https://example.com/ticket/7 --timestamp 2026-05-16T09:30:00Z\n"
        "  merkle-memory bank add private-bank --salted --type fact --scope user --content x",
    },
    "list": {
        "description": "List the memories that verify (active ones unless --archived or "
        "--all): id, status, timestamp, type, scope and the start of the content. Files that "
        "do not verify are left out with a warning.",
        "epilog": "examples:\n"
        "  merkle-memory bank list bank\n"
        "  merkle-memory bank list bank --all --json",
    },
    "verify": {
        "description": "Recompute the id of every memory file (active and archived), compare "
        "it with the stored id and the file name, and verify the bank's ledger. Exit 1 "
        "naming each tampered file.",
        "epilog": "examples:\n"
        "  merkle-memory bank verify bank\n"
        "  merkle-memory bank verify bank --json -q",
    },
    "archive": {
        "description": "Move a memory file into memories/archive/ (os.replace, never "
        "rewritten) and print its new path relative to the bank. ID may be a unique prefix "
        "of the id (4 hex digits or more).",
        "epilog": "examples:\n"
        "  ID=$(merkle-memory bank add bank --type fact --scope project --content old)\n"
        '  merkle-memory bank archive bank "$ID"\n'
        "  merkle-memory bank archive bank 3f2a9c --json",
    },
    "consolidate": {
        "description": "Write one memory whose links are mm://memory/<id> of the given "
        "memories (ids or unique prefixes), then archive them; print the new id. A rerun "
        "after a crash finishes the archiving.",
        "epilog": "examples:\n"
        '  merkle-memory bank consolidate bank "$ID1" "$ID2" --content "Both say: use pytest"',
    },
    "migrate": {
        "description": "Rewrite legacy memory files (random ids, a status field, object "
        "links) as content-addressed files; idempotent, nothing deleted before its "
        "replacement is durable. A legacy status archived, subsumed, superseded or falsified "
        "(or a file in memories/archive/) puts the new file in memories/archive/. Links to "
        "memories migrated now or by an earlier run (memories/.migrated.json) get the new id; "
        "links left unresolved and link cycles are warned about. Tur's OKF markdown memories "
        "(memories/active/, archive/, subsumed/*.md; needs the yaml extra) are migrated too: "
        "content byte-exact, Tur's hash checked first, subsumed/ archived. Files that cannot be "
        "migrated are reported and left untouched.",
        "epilog": "examples:\n"
        "  merkle-memory bank migrate bank\n"
        "  merkle-memory bank migrate bank --json > migration.json",
    },
    "seal": {
        "description": "Adopt every memory file that verifies and has no ledger entry (after "
        "a crash between writing and sealing) and print the ids adopted. Refuses a broken "
        "chain (exit 1); a tampered file is never sealed.",
        "epilog": "examples:\n"
        "  merkle-memory bank seal bank\n"
        "  merkle-memory bank seal bank --json",
    },
}


_JSON_HELP = "one JSON document on stdout"
_ID_HELP = "memory id, or a unique prefix of it (>= 4 hex)"


def _command(
    subparsers: Any,
    name: str,
    func: Callable[[argparse.Namespace], int],
    summary: str,
    *,
    json_flag: bool = False,
    bank_help: str | None = None,
) -> argparse.ArgumentParser:
    """Add the subcommand ``name`` with its ``BANK`` argument (and ``--json`` when asked)."""
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=summary, **_TEXTS[name])
    parser.add_argument("bank", metavar="BANK", help=bank_help)
    if json_flag:
        parser.add_argument("--json", action="store_true", help=_JSON_HELP)
    parser.set_defaults(func=func)
    return parser


def register(subparsers: Any) -> None:
    """Add the ``bank`` subcommands to ``subparsers`` (DESIGN section 7)."""
    add = _command(
        subparsers,
        "add",
        _add,
        "save a memory; prints its id",
        json_flag=True,
        bank_help="the bank folder (created if missing; not its parents)",
    )
    add.add_argument("--type", required=True, help="a slug [a-z0-9_-]+, e.g. fact")
    add.add_argument("--scope", required=True, help="e.g. project, user")
    add.add_argument("--content", required=True, help="the memory text (kept byte-exact)")
    add.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
    add.add_argument("--link", action="append", default=[], help="a URI (repeatable)")
    add.add_argument("--source-session", default=None, help="the session it came from")
    add.add_argument(
        "--timestamp",
        default=None,
        help="ISO 8601 with a UTC offset (default: now, unless the same memory is in the bank)",
    )
    add.add_argument(
        "--salted",
        action="store_true",
        help="make the bank salted (recorded in BANK/testimony.json; a salted bank stays "
        "salted): each memory's id then hashes a random salt kept in its file",
    )

    lst = _command(subparsers, "list", _list, "list memories that verify", json_flag=True)
    which = lst.add_mutually_exclusive_group()
    which.add_argument("--archived", action="store_true", help="archived memories only")
    which.add_argument("--all", action="store_true", help="active and archived memories")

    _command(
        subparsers, "verify", _verify, "check every memory file and the ledger", json_flag=True
    )

    arc = _command(
        subparsers, "archive", _archive, "move a memory into memories/archive/", json_flag=True
    )
    arc.add_argument("id", metavar="ID", type=hex_prefix, help=_ID_HELP)

    con = _command(
        subparsers,
        "consolidate",
        _consolidate,
        "write one memory linking to ID..., then archive them",
        json_flag=True,
    )
    con.add_argument(
        "ids", metavar="ID", nargs="+", type=hex_prefix, help="memories to consolidate: " + _ID_HELP
    )
    con.add_argument("--content", required=True, help="the consolidated text")
    con.add_argument("--type", default=None, help="default: the originals' common type")
    con.add_argument("--scope", default=None, help="default: the originals' common scope")

    _command(
        subparsers,
        "migrate",
        _migrate,
        "rewrite legacy memory files content-addressed",
        json_flag=True,
    )
    _command(
        subparsers,
        "seal",
        _seal,
        "adopt memory files with no ledger entry; prints the ids adopted",
        json_flag=True,
    )
