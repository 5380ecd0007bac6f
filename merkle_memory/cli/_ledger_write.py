"""``merkle-memory ledger save`` and ``ledger recover``: writing a tenant (DESIGN section 7).

``ledger save TENANT FILE|-`` reads one record (a JSON object with an ``id``; ``-`` reads
stdin), parses it strictly (as record files are read: duplicate keys, NaN and invalid UTF-8
are refused), then ``Tenant.save`` writes ``memory/<id>.json`` atomically and seals it
(``op: "save"``); a missing tenant folder is created. Text: ``TENANT: saved ID at seq N
(HASH)`` on stdout; JSON: ``{"tenant", "file" (relative to the tenant), "entry": the entry's
seven keys}``; ``TENANT`` may be ``postgresql://...#tenant`` (:func:`open_tenant`), with the
same output (``file`` names the record's row as the file). Exit 1 when the record is refused
(not JSON, not an object, a bad id, a sealed value outside RFC 8785) or the append is (a
broken chain, a rollback): nothing is sealed then.

``ledger recover TENANT --accept-rollback`` is the audited way out of a refused rollback
(:func:`merkle_memory.ledger.recovery.accept_rollback`): the evidence (the old head and each
seq it vouched for that the ledger lacks) goes to ``TENANT/ledger.recovery-<n>.json`` first,
then the head is set to the ledger's last entry so the next save continues from it. Text:
one line on stdout; JSON: ``{"accepted": bool}`` plus, when accepted, ``record`` (its path),
``head`` (``{seq, hash}``), ``on_disk_seq``, ``lacking`` (seqs) and ``reused``. Nothing to
accept is exit 0 (``accepted: false``); a chain broken on disk is refused (exit 1). A
``postgresql://...#tenant`` is recovered in place: the record is a row of ``mm_ledger_files``
(the same bytes) written with the new head in one transaction; ``record`` is then its name.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Final

from .._json import strict_decode
from .._pg import is_url, redact
from ..errors import RecordError, TenantError
from ..ledger import PostgresLedgerStore, open_tenant
from ..ledger.records import record_path
from ..ledger.recovery import accept_rollback
from ._output import must_exist, one_line, print_json

__all__ = ["register"]

_SAVE_EPILOG: Final = """\
examples:
  merkle-memory ledger save agents/cc note-2.json
  merkle-memory ledger save 'postgresql:///agents?host=/run/pg#cc' note-2.json
  jq '.summary = "we chose postgres"' agents/cc/memory/note-2.json |
      merkle-memory ledger save agents/cc - --json"""

_RECOVER_EPILOG: Final = """\
examples:
  merkle-memory ledger recover agents/cc --accept-rollback
  merkle-memory ledger recover agents/cc --accept-rollback --json > accepted.json
  merkle-memory ledger recover 'postgresql:///agents?host=/run/pg#cc' --accept-rollback"""


def register(subparsers: Any) -> None:
    """Add ``save`` and ``recover`` to the ``ledger`` group."""
    p = subparsers.add_parser(
        "save",
        help="write one record and seal it (op: save)",
        description="Write a record (a JSON object with an id, from FILE or stdin) as "
        "TENANT/memory/<id>.json, atomically, and seal it in the ledger (op: save): the way "
        "to record an honest edit (seal only adopts records that have no entry, so an "
        "edited record stays altered until it is saved). The record is read strictly "
        "(duplicate keys, NaN, invalid UTF-8 are refused); a missing tenant folder is "
        "created; TENANT may be a database tenant (postgresql://...#tenant). Exit 1 if "
        "the record or the append is refused (nothing is sealed).",
        epilog=_SAVE_EPILOG,
    )
    p.add_argument(
        "tenant",
        metavar="TENANT",
        help="tenant folder (created if missing) or database tenant URL postgresql://...#tenant",
    )
    p.add_argument("file", metavar="FILE", help="the record, a JSON object ('-': stdin)")
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=_save)

    p = subparsers.add_parser(
        "recover",
        help="accept a refused rollback, keeping the evidence",
        description="The way out of a refused rollback (ledger.jsonl behind ledger.head, "
        "or holding another entry at its seq), once the loss is known and accepted: write "
        "the evidence (the old head, and every seq it vouched for that the ledger lacks with "
        "the hashes still known for it) to TENANT/ledger.recovery-<n>.json, durably, then "
        "set ledger.head to the ledger's last entry so that the next save or seal continues "
        "the chain from what is on disk. Nothing is deleted; verify lists the records. "
        "Refuses a chain broken on disk (exit 1); nothing to accept is exit 0. A database "
        "tenant (postgresql://...#tenant) keeps the record as a row of mm_ledger_files, "
        "written with the new head in one transaction.",
        epilog=_RECOVER_EPILOG,
    )
    p.add_argument(
        "tenant",
        metavar="TENANT",
        help="tenant (or bank) folder, or database tenant URL postgresql://...#tenant",
    )
    p.add_argument(
        "--accept-rollback",
        action="store_true",
        required=True,
        help="required: the loss of the entries the ledger lacks is accepted",
    )
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=_recover)


def _read_record(source: str) -> dict[str, Any]:
    """The record in ``source`` (a path, or ``-`` for stdin), parsed strictly."""
    if source == "-":
        data = sys.stdin.buffer.read()
        where = "stdin"
    else:
        must_exist(source)
        data = Path(source).read_bytes()
        where = source
    try:
        value = strict_decode(data.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise RecordError(f"{where}: not a JSON record ({exc})") from None
    if type(value) is not dict:
        raise RecordError(f"{where}: a record must be a JSON object, not {type(value).__name__}")
    return value


def _save(args: argparse.Namespace) -> int:
    record = _read_record(args.file)
    tenant = open_tenant(args.tenant)
    entry = tenant.save(record)
    # A database tenant's record row is named as the file would be (``memory/<id>.json``).
    file = record_path("memory", entry.memory_id).as_posix()
    if args.json:
        print_json({"tenant": tenant.name, "file": file, "entry": entry.to_dict()})
    else:
        print(one_line(f"{tenant.name}: saved {entry.memory_id} at seq {entry.seq} ({entry.hash})"))
    return 0


def _recover(args: argparse.Namespace) -> int:
    if is_url(args.tenant):
        # a tenant that is not there has nothing to accept, and nothing is created
        source: PostgresLedgerStore | Path = PostgresLedgerStore.existing(args.tenant)
        name = redact(args.tenant)
    else:
        must_exist(args.tenant)
        folder = Path(args.tenant)
        if not folder.is_dir():
            raise TenantError("not a tenant folder (not a folder)", args.tenant)
        source = folder / "ledger.jsonl"
        name = folder.resolve().name or str(folder)
    done = accept_rollback(source)
    if done is None:
        if args.json:
            print_json({"accepted": False})
        else:
            print(one_line(f"{name}: nothing to accept: the ledger holds what ledger.head records"))
        return 0
    # A folder's record is a file (its path); a database tenant's, a row of mm_ledger_files.
    where = str(done.record) if not is_url(args.tenant) else f"{done.record} (mm_ledger_files)"
    if args.json:
        print_json({"accepted": True, **done.to_dict(), "record": str(done.record)})
        return 0
    lacking = done.lacking
    seqs = f"seq {lacking[0]}" if len(lacking) == 1 else f"seqs {lacking[0]}-{lacking[-1]}"
    print(
        one_line(
            f"{name}: accepted the rollback from seq {done.head.seq} to seq {done.on_disk_seq}"
            f" (lacking {seqs}); evidence in {where}"
            f"{' (written by an interrupted run)' if done.reused else ''};"
            f" the next save is seq {done.on_disk_seq + 1}"
        )
    )
    return 0
