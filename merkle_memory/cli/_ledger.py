"""``merkle-memory ledger verify`` and ``ledger seal`` (DESIGN section 7, issue 3 item 6).

Both take ``TENANT...`` or ``--all ROOT`` (every ``ROOT/agents/<name>/`` whose name is a
tenant name; other folders are skipped with a notice on stderr). With ``--json`` stdout holds
one JSON object ``{tenant_name: report}``; a seal report adds ``sealed_now`` and
``sealed_ids``; a tenant that failed or was refused also carries ``error`` (a message), with
the verify report's keys (``ok`` false) when the refusal is a broken chain or a rollback. One
tenant's failure never stops the others. Exit 0 when every tenant is ok, 1 when any is not ok,
failed or was refused (or ``--all`` finds no tenant), 2 for usage errors.

``verify`` also compares the Merkle sidecar (``ledger.tree``) of an ok tenant with its ledger
(read-only): a sidecar holding hashes the ledger does not give makes the tenant not ok. A
symlink, FIFO or other non-regular file in place of a file of a tenant's ledger is refused
(``StoreFileError``, never followed or opened so as to block), and ``--all`` skips a symlink
under ``ROOT/agents/`` with a notice.

A tenant that is not ok, failed or was refused also gets one line ``error: TENANT: ...`` on
stderr, never silenced. A folder that is not a tenant (neither ``memory/`` nor ``ledger.jsonl``,
or a ``memory/`` that is a symbolic link) is refused that way: ``verify`` never reports it ok
and ``seal`` creates nothing in it. Messages (skipped folders, records that could not be
sealed, each with its reason) go to stderr and are silenced by ``-q``. On a terminal a
progress line counts the tenants done (useful with ``--all``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from .._pg import is_url, redact, split_url
from .._progress import ProgressCallback
from ..errors import LedgerBrokenError, LedgerRollbackError, MerkleMemoryError, TenantError
from ..ledger import (
    PostgresTenant,
    SealReport,
    Tenant,
    VerifyReport,
    list_postgres_tenants,
    open_tenant,
)
from ..ledger.proofs import check
from ..ledger.recovery import recovery_record_names
from ..ledger.tenant import discover_tenants
from ._output import Progress, error, note, one_line, plural, print_json, rollback_way_out

__all__ = ["register"]

_LIST_AT_MOST: Final = 8
_VERDICT_LISTS: Final = ("altered", "missing", "unsealed", "disputed")
_FORGET_LISTS: Final = ("forgotten", "reappeared")  # shown only when not empty (issue 20)


_EPILOGS: Final = {
    "verify": """\
examples:
  merkle-memory ledger verify agents/cc agents/rocky
  merkle-memory ledger verify --all ~/.agent --json
  merkle-memory ledger verify --all 'postgresql:///agents?host=/run/pg' --json""",
    "seal": """\
examples:
  merkle-memory ledger seal agents/cc
  merkle-memory ledger seal --all ~/.agent --json
  merkle-memory ledger seal 'postgresql:///agents?host=/run/pg#cc'""",
}

_DESCRIPTIONS: Final = {
    "verify": "Verify each tenant's ledger.jsonl against its memory/*.json records: the hash "
    "chain, then every record as sealed, altered, missing, unsealed or disputed; a torn tail "
    "left by a crash is reported as such (the next save or seal moves it aside). Changes "
    "nothing. Exit 1 if any tenant is not ok or has an unsealed record (nothing protects it), "
    "or --all finds none.",
    "seal": "Adopt every record of each tenant that has no ledger entry (op: adopt, one "
    "group commit), after quarantining a torn tail. Refuses a broken chain or a rollback "
    "(exit 1); the other tenants are still sealed.",
}


def register(subparsers: Any) -> None:
    """Add ``verify`` and ``seal`` to the ``ledger`` group."""
    specs: tuple[tuple[str, Callable[[argparse.Namespace], int], str], ...] = (
        ("verify", _verify, "verify tenants' ledgers against their records (changes nothing)"),
        ("seal", _seal, "adopt every record that has no ledger entry (op: adopt)"),
    )
    for name, handler, text in specs:
        parser = subparsers.add_parser(
            name, help=text, description=_DESCRIPTIONS[name], epilog=_EPILOGS[name]
        )
        parser.add_argument(
            "tenants",
            nargs="*",
            metavar="TENANT",
            help="tenant folder(s) or postgresql://...#tenant",
        )
        parser.add_argument(
            "--all",
            dest="all_root",
            metavar="ROOT",
            help="every tenant under ROOT/agents/, or every tenant of a postgresql:// database",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON document")
        parser.set_defaults(func=handler, ledger_parser=parser)


def _targets(args: argparse.Namespace) -> list[Path | str] | int:
    """The tenant folders (or ``postgresql://...#tenant`` URLs) to visit, or an exit code (2
    usage, 1 none found). ``--all`` given a database URL visits every tenant in it."""
    parser: argparse.ArgumentParser = args.ledger_parser
    if bool(args.tenants) == (args.all_root is not None):
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: give TENANT... or --all ROOT (not both)", file=sys.stderr)
        return 2
    if args.all_root is None:
        return [t if is_url(t) else Path(t) for t in args.tenants]
    if is_url(args.all_root):
        base, fragment = split_url(args.all_root)
        if fragment is not None:
            parser.print_usage(sys.stderr)
            print(
                f"{parser.prog}: error: --all takes a database URL without #tenant (to visit one "
                f"tenant, give it as TENANT): {one_line(redact(args.all_root))}",
                file=sys.stderr,
            )
            return 2
        urls: list[Path | str] = [f"{base}#{n}" for n in list_postgres_tenants(base)]
        if not urls:
            error("no tenants in the database")
            return 1
        return urls
    if not os.path.lexists(args.all_root):
        error(f"{args.all_root}: does not exist")
        return 1
    try:
        tenants, skipped = discover_tenants(args.all_root)
    except OSError as exc:
        error(f"{args.all_root}: {exc.strerror or exc}")
        return 1
    agents = Path(args.all_root) / "agents"
    for name in skipped:
        link = agents.is_symlink() or (agents / name).is_symlink()
        why = "a symbolic link (never followed)" if link else "not a valid tenant name"
        note(args, f"skipped {one_line(name)}: {why}")
    if not tenants:
        error(f"no tenants under {Path(args.all_root) / 'agents'}")
        return 1
    return list(tenants)


def _name(path: Path | str, taken: dict[str, Any]) -> str:
    """The tenant's key in the JSON output and prefix of its lines: its name, or (when
    another tenant took the name) its path or URL, any password replaced by ``***``."""
    if isinstance(path, str):
        name = path.rsplit("#", 1)[-1] if "#" in path else ""
        return name if name and name not in taken else redact(path)
    name = path.resolve().name or str(path)
    return name if name not in taken else str(path)


Action = Callable[[Tenant | PostgresTenant, ProgressCallback], VerifyReport | SealReport]
"""What ``verify`` or ``seal`` does to one tenant, reporting its progress."""


def _run(args: argparse.Namespace, verb: str, action: Action) -> int:
    targets = _targets(args)
    if isinstance(targets, int):
        return targets
    results: dict[str, Any] = {}
    failed = False
    with Progress.for_args(args, f"ledger {verb}", total=len(targets)) as progress:
        for path in targets:
            name = _name(path, results)
            progress.show(name)
            outcome, ok = _one(args, name, path, action, progress)
            failed = failed or not ok
            results[name] = outcome
            progress.advance()
    if args.json:
        print_json(results)
    return 1 if failed else 0


def _one(
    args: argparse.Namespace,
    name: str,
    path: Path | str,
    action: Action,
    progress: Progress,
) -> tuple[dict[str, Any], bool]:
    """Run ``action`` on one tenant; return its JSON outcome and whether it passes (ok,
    and for ``verify`` no unsealed record)."""
    outcome: dict[str, Any]
    tenant: Tenant | PostgresTenant | None = None
    try:
        if isinstance(path, Path):
            if not os.path.lexists(path):
                raise TenantError("does not exist", str(path))
            if not path.is_dir():
                raise TenantError("not a tenant folder", str(path))
        tenant = open_tenant(path)
        result = action(tenant, progress.reporter(name))
    except LedgerBrokenError as exc:
        progress.clear()
        # A refusal names its tenant (the API caller needs it); the line names it once.
        text = str(exc).removeprefix(f"{name}: ")
        error(f"{name}: {text}")
        outcome = {"error": text}
        if isinstance(exc.report, VerifyReport):
            outcome = {**exc.report.to_dict(), "sealed_now": 0, "sealed_ids": [], **outcome}
            if not args.json:
                _print_text(name, exc.report, None)
        return outcome, False
    except (MerkleMemoryError, OSError) as exc:
        progress.clear()
        if isinstance(exc, TenantError):
            message = exc.reason
        elif isinstance(exc, MerkleMemoryError):
            message = str(exc)
        else:
            message = _oserror(exc)
        error(f"{name}: {message}")
        rollback = isinstance(exc, LedgerRollbackError) and tenant is not None
        report = _report_anyway(tenant) if rollback and tenant is not None else None
        if report is None:
            return {"ok": False, "error": message}, False
        extra = {"sealed_now": 0, "sealed_ids": []} if args.func is _seal else {}
        return {**report.to_dict(), **extra, "ok": False, "error": message}, False
    report = result.report if isinstance(result, SealReport) else result
    accepted = recovery_record_names(tenant.ledger) if tenant is not None else []
    # verify: an unsealed record has no entry, so the ledger protects nothing of it; a tenant
    # with one does not pass (exit 1), though its report's ``ok`` (the chain and the sealed
    # records, as the anchor defines it) may be true.
    passes = report.ok and not (args.func is _verify and report.unsealed)
    if not args.json:
        progress.clear()
        _print_text(name, report, result if isinstance(result, SealReport) else None, passes)
        for record in accepted:
            print(f"  accepted rollback: {one_line(record)}")
    if not report.ok:
        progress.clear()
        error(f"{name}: {_problems(report)}{_way_out(report, path)}")
    elif not passes:
        progress.clear()
        error(
            f"{name}: not sealed: {plural(len(report.unsealed), 'record')} without a ledger "
            f"entry (not protected); run: merkle-memory ledger seal {shlex.quote(str(path))}"
        )
    if isinstance(result, SealReport) and result.skipped:
        progress.clear()
        ids = _ids([f"{mid} ({why})" for mid, why in result.skip_reasons])
        note(args, f"warning: {name}: could not seal {len(result.skipped)}: {one_line(ids)}")
    outcome = result.to_dict()
    if accepted:
        outcome["accepted_rollbacks"] = accepted
    return outcome, passes


def _way_out(report: VerifyReport, path: Path | str) -> str:
    """For a chain broken by a rollback (the head records what the ledger lacks): how to
    accept it on the record."""
    if report.chain != "broken" or not (report.reason or "").startswith("ledger.head records"):
        return ""
    return rollback_way_out(str(path))


def _report_anyway(tenant: Tenant | PostgresTenant) -> VerifyReport | None:
    """The verify report of a tenant whose seal was refused (a rollback), or ``None``."""
    try:
        return tenant.verify()
    except (MerkleMemoryError, OSError):
        return None


def _problems(report: VerifyReport) -> str:
    """What makes ``report`` not ok, in one line."""
    parts = [report.summary()] if report.chain == "broken" else []
    parts += [
        f"{len(getattr(report, k))} {k}"
        for k in ("altered", "missing", "reappeared")
        if getattr(report, k)
    ]
    return "not ok: " + "; ".join(parts or [report.summary()])


def _oserror(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename is not None else ""
    return f"{exc.strerror or exc}{where}"


def _ids(ids: tuple[str, ...] | list[str]) -> str:
    shown = ", ".join(ids[:_LIST_AT_MOST])
    more = len(ids) - _LIST_AT_MOST
    return shown + (f" (+{more} more)" if more > 0 else "")


def _print_text(
    name: str, report: VerifyReport, seal: SealReport | None, passes: bool | None = None
) -> None:
    counts = " · ".join(
        [f"sealed {report.sealed}"]
        + [f"{key} {len(getattr(report, key))}" for key in _VERDICT_LISTS]
        + [f"{key} {len(getattr(report, key))}" for key in _FORGET_LISTS if getattr(report, key)]
    )
    status = "NOT OK" if not report.ok else "ok" if passes is not False else "NOT SEALED"
    shown = one_line(name)
    entries = plural(report.entries, "entry")
    print(f"{shown}: {status}: chain {report.chain} ({entries}) · {counts}")
    if report.chain == "broken":
        print(f"  broken at seq {report.broken_at}: {one_line(report.reason or '')}")
    if report.torn_tail is not None:
        offset, length = report.torn_tail
        print(
            f"  torn tail: {plural(length, 'byte')} at byte {offset}, left by a crash in the "
            "middle of an append (not an entry); the next save or seal moves it to ledger.torn"
        )
    for key in (*_VERDICT_LISTS, *_FORGET_LISTS):
        ids: tuple[str, ...] = getattr(report, key)
        if ids:
            print(f"  {key}: {_ids(ids)}")
    if report.ignored_claimants:
        claims = [f"{file} (claims {mid})" for mid, file in report.ignored_claimants]
        print(f"  ignored claimants: {one_line(_ids(claims))}")
    if seal is not None:
        line = f"  sealed now {seal.sealed_now}"
        print(line + (f": {_ids(seal.sealed_ids)}" if seal.sealed_ids else ""))


def _verify_tenant(tenant: Tenant | PostgresTenant, progress: ProgressCallback) -> VerifyReport:
    """``tenant.verify()``; when it is ok, also the Merkle sidecar against the ledger (a
    sidecar that differs raises ``TreeLogError``: the tenant is not ok)."""
    report = tenant.verify(progress=progress)
    if report.ok:
        check(tenant.ledger, behind_ok=True, progress=progress)
    return report


def _verify(args: argparse.Namespace) -> int:
    return _run(args, "verify", _verify_tenant)


def _seal(args: argparse.Namespace) -> int:
    return _run(args, "seal", lambda tenant, progress: tenant.seal(progress=progress))
