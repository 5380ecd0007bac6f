"""``merkle-memory ledger export URL DIR`` and ``ledger import DIR URL``: move a tenant between
a PostgreSQL database and a folder, byte for byte (issue 19).

``export`` writes a new tenant folder (``DIR`` absent or empty): ``memory/<name>`` of every
record row, ``ledger.jsonl`` (the stored lines), ``ledger.torn`` if anything was quarantined,
``testimony.json`` if the tenant records its testimony mode, ``forgotten/<name>`` of every
tombstone row, and ``ledger.head``; the folder appears whole, in one rename. ``import``
copies a tenant folder into a tenant of the database that does not exist or is empty, in one
transaction (its testimony mode and tombstones included). Both print
the tenant's verify report afterwards (``--json``: ``{tenant_name: report}``, as ``ledger
verify``), which equals the source's. Exit 0 when the copy verifies ok, 1 when it is not ok (the
error line names the failing verdicts and ids) or the move was refused before anything was
written (a non-empty target, a record or tombstone file that is a symbolic link, a re-save or
a forget left pending by a crash), 2 for usage errors.
"""

from __future__ import annotations

import argparse
from typing import Any

from .._pg import is_url, redact
from ..errors import MerkleMemoryError
from ..ledger import Tenant, export_tenant, import_tenant
from ._output import describe_oserror, error, must_exist, note, one_line, print_json

__all__ = ["register"]

_EXPORT_EPILOG = """\
examples:
  merkle-memory ledger export 'postgresql:///agents?host=/run/pg#cc' backup/cc
  merkle-memory ledger export 'postgresql://app@db.internal/agents#cc' cc --json"""

_IMPORT_EPILOG = """\
examples:
  merkle-memory ledger import agents/cc 'postgresql:///agents?host=/run/pg#cc'
  merkle-memory ledger import agents/cc 'postgresql://app@db.internal/agents#cc' --json"""


def register(subparsers: Any) -> None:
    """Add ``export`` and ``import`` to the ``ledger`` group."""
    export = subparsers.add_parser(
        "export",
        help="copy a postgresql:// tenant into a new tenant folder, byte for byte",
        description="Copy a tenant of a PostgreSQL database (records, ledger lines, head, "
        "quarantined fragments, testimony mode, tombstones) into a new tenant folder, then "
        "verify the folder.",
        epilog=_EXPORT_EPILOG,
    )
    export.add_argument("url", metavar="URL", help="postgresql://...#tenant")
    export.add_argument("folder", metavar="DIR", help="the new tenant folder (absent or empty)")
    export.add_argument("--json", action="store_true", help="print the verify report as JSON")
    export.set_defaults(func=_export)
    imp = subparsers.add_parser(
        "import",
        help="copy a tenant folder into a postgresql:// tenant, byte for byte",
        description="Copy a tenant folder (records, ledger lines, head, quarantined fragments, "
        "testimony.json, forgotten/ tombstones) into a new or empty tenant of a PostgreSQL "
        "database in one transaction, then verify it there.",
        epilog=_IMPORT_EPILOG,
    )
    imp.add_argument("folder", metavar="DIR", help="the tenant folder")
    imp.add_argument("url", metavar="URL", help="postgresql://...#tenant (new or empty)")
    imp.add_argument("--json", action="store_true", help="print the verify report as JSON")
    imp.set_defaults(func=_import)


def _finish(args: argparse.Namespace, tenant: Any, where: str) -> int:
    report = tenant.verify()
    if args.json:
        print_json({tenant.name: report.to_dict()})
    note(args, f"{where}: {report.summary()}")
    if not report.ok:
        error(f"{tenant.name}: the copy is not ok: {_cause(report)}")
        return 1
    return 0


def _cause(report: Any) -> str:
    """What makes a copy's verify report not ok, in one line: the break, and each failing
    verdict with (up to three of) its ids."""
    parts = [report.summary()] if report.chain == "broken" else []
    for key in ("altered", "missing", "reappeared"):
        ids = getattr(report, key)
        if ids:
            more = f" (+{len(ids) - 3} more)" if len(ids) > 3 else ""
            parts.append(f"{len(ids)} {key}: {', '.join(ids[:3])}{more}")
    return one_line("; ".join(parts or [report.summary()]))


def _export(args: argparse.Namespace) -> int:
    if not is_url(args.url):
        error(f"not a postgresql:// URL: {one_line(args.url)}")
        return 2
    try:
        folder = export_tenant(args.url, args.folder)
        return _finish(args, Tenant(folder), str(folder))
    except MerkleMemoryError as exc:
        error(redact(str(exc)))
        return 1
    except OSError as exc:
        error(redact(describe_oserror(exc)))
        return 1


def _import(args: argparse.Namespace) -> int:
    if not is_url(args.url):
        error(f"not a postgresql:// URL: {one_line(args.url)}")
        return 2
    try:
        must_exist(args.folder)
        tenant = import_tenant(args.folder, args.url)
        return _finish(args, tenant, tenant.store.label)
    except MerkleMemoryError as exc:
        error(redact(str(exc)))
        return 1
    except OSError as exc:
        error(redact(describe_oserror(exc)))
        return 1
