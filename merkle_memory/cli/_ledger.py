"""``merkle-memory ledger verify`` and ``ledger seal`` (DESIGN section 7, issue 3 item 6).

Both take ``TENANT...`` or ``--all ROOT`` (every ``ROOT/agents/<name>/`` whose name is a
tenant name; other folders are skipped with a notice on stderr). With ``--json`` stdout holds
one JSON object ``{tenant_name: report}``; a seal report adds ``sealed_now`` and
``sealed_ids``; a tenant that failed or was refused also carries ``error`` (a message). One
tenant's failure never stops the others. Exit 0 when every tenant is ok, 1 when any is not ok,
failed or was refused (or ``--all`` finds no tenant), 2 for usage errors.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from ..errors import LedgerBrokenError, MerkleMemoryError
from ..ledger import VerifyReport
from ..tenant import SealReport, Tenant, discover_tenants

__all__ = ["register"]

_LIST_AT_MOST: Final = 8
_VERDICT_LISTS: Final = ("altered", "missing", "unsealed", "disputed")


def register(subparsers: Any) -> None:
    """Add ``verify`` and ``seal`` to the ``ledger`` group."""
    specs: tuple[tuple[str, Callable[[argparse.Namespace], int], str], ...] = (
        ("verify", _verify, "verify tenants' ledgers against their records (changes nothing)"),
        ("seal", _seal, "adopt every record that has no ledger entry (op: adopt)"),
    )
    for name, handler, text in specs:
        parser = subparsers.add_parser(name, help=text, description=text)
        parser.add_argument("tenants", nargs="*", metavar="TENANT", help="tenant folder(s)")
        parser.add_argument(
            "--all", dest="all_root", metavar="ROOT", help="every tenant under ROOT/agents/"
        )
        parser.add_argument("--json", action="store_true", help="print one JSON document")
        parser.set_defaults(func=handler, ledger_parser=parser)


def _targets(args: argparse.Namespace) -> list[Path] | int:
    """The tenant folders to visit, or an exit code (2 usage, 1 none found)."""
    parser: argparse.ArgumentParser = args.ledger_parser
    if bool(args.tenants) == (args.all_root is not None):
        parser.print_usage(sys.stderr)
        print(f"{parser.prog}: error: give TENANT... or --all ROOT (not both)", file=sys.stderr)
        return 2
    if args.all_root is None:
        return [Path(t) for t in args.tenants]
    try:
        tenants, skipped = discover_tenants(args.all_root)
    except OSError as exc:
        print(f"error: {args.all_root}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    for name in skipped:
        print(f"skipped {name}: not a valid tenant name", file=sys.stderr)
    if not tenants:
        print(f"error: no tenants under {Path(args.all_root) / 'agents'}", file=sys.stderr)
        return 1
    return tenants


def _name(path: Path, taken: dict[str, Any]) -> str:
    name = path.resolve().name or str(path)
    return name if name not in taken else str(path)


def _run(args: argparse.Namespace, action: Callable[[Tenant], VerifyReport | SealReport]) -> int:
    targets = _targets(args)
    if isinstance(targets, int):
        return targets
    results: dict[str, Any] = {}
    failed = False
    for path in targets:
        name = _name(path, results)
        outcome: dict[str, Any]
        try:
            if not path.is_dir():
                raise MerkleMemoryError(f"{path} is not a tenant folder")
            result = action(Tenant(path))
        except LedgerBrokenError as exc:
            failed = True
            print(f"error: {name}: {exc}", file=sys.stderr)
            outcome = {"error": str(exc)}
            if isinstance(exc.report, VerifyReport):
                outcome = {**exc.report.to_dict(), "sealed_now": 0, "sealed_ids": [], **outcome}
                if not args.json:
                    _print_text(name, exc.report, None)
        except (MerkleMemoryError, OSError) as exc:
            failed = True
            message = str(exc) if isinstance(exc, MerkleMemoryError) else _oserror(exc)
            print(f"error: {name}: {message}", file=sys.stderr)
            outcome = {"ok": False, "error": message}
        else:
            report = result.report if isinstance(result, SealReport) else result
            failed = failed or not report.ok
            outcome = result.to_dict()
            if not args.json:
                _print_text(name, report, result if isinstance(result, SealReport) else None)
            if isinstance(result, SealReport) and result.skipped:
                ids = _ids(result.skipped)
                print(f"{name}: could not seal {len(result.skipped)}: {ids}", file=sys.stderr)
        results[name] = outcome
    if args.json:
        json.dump(results, sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    return 1 if failed else 0


def _oserror(exc: OSError) -> str:
    where = f": {exc.filename}" if exc.filename is not None else ""
    return f"{exc.strerror or exc}{where}"


def _ids(ids: tuple[str, ...] | list[str]) -> str:
    shown = ", ".join(ids[:_LIST_AT_MOST])
    more = len(ids) - _LIST_AT_MOST
    return shown + (f" (+{more} more)" if more > 0 else "")


def _print_text(name: str, report: VerifyReport, seal: SealReport | None) -> None:
    counts = " · ".join(
        [f"sealed {report.sealed}"]
        + [f"{key} {len(getattr(report, key))}" for key in _VERDICT_LISTS]
    )
    status = "ok" if report.ok else "NOT OK"
    print(f"{name}: {status}: chain {report.chain} ({report.entries} entries) · {counts}")
    if report.chain == "broken":
        print(f"  broken at seq {report.broken_at}: {report.reason}")
    for key in _VERDICT_LISTS:
        ids: tuple[str, ...] = getattr(report, key)
        if ids:
            print(f"  {key}: {_ids(ids)}")
    if seal is not None:
        line = f"  sealed now {seal.sealed_now}"
        print(line + (f": {_ids(seal.sealed_ids)}" if seal.sealed_ids else ""))


def _verify(args: argparse.Namespace) -> int:
    return _run(args, lambda tenant: tenant.verify())


def _seal(args: argparse.Namespace) -> int:
    return _run(args, lambda tenant: tenant.seal())
