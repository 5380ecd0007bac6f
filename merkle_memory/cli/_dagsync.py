"""``merkle-memory dag sync``, ``dag restore`` and ``dag sessions``: the transcript archive.

``dag sync PATH... --store DB [--json]`` imports every transcript under the files and folders
given into the node store ``DB`` (a SQLite file or a ``postgresql://`` URL, created if missing),
incrementally, and archives
their raw bytes there (:func:`merkle_memory.transcripts.sync_paths`). A file the store
remembers with the same device, inode, size and modification time is only stat'ed; a grown
file has only its new part parsed. With ``--json`` it prints exactly::

    {"files": N, "new_files": N, "updated_files": N, "skipped": N, "new_nodes": N, "nodes": N}

(files found, archived for the first time, changed since the last sync, not archived, nodes
new to the store, nodes in it). Each skipped file, and each archived file whose import failed,
is named on stderr with the reason (``-q`` silences them).

``dag restore --store DB ORIGINAL_PATH --out FILE [--version N]`` writes the archived bytes
of a file back, byte for byte (its latest version, or version N), after checking every chunk
against its SHA-256 and the whole against the version's digest; ``--out -`` writes them to
stdout. ``FILE`` is written only then, atomically (temporary file, fsync, rename, fsync of
the folder), so a failed check or a crash leaves no partial file.

``dag sessions --store DB [--json]`` lists the archived files: path, format, size, version,
nodes and last sync time; with ``--json`` a list of objects ``{"path", "format", "size",
"version", "versions", "nodes", "digest", "first_sync", "last_sync", "error", "exists"}``
(times in epoch seconds; ``exists``: whether the path still exists).

Exit codes: 0 ok (``dag sync`` also when some files were skipped or failed to import: their
bytes are archived and the reason is printed); 1 a store that cannot be opened or written,
an unknown archived path or version, archived bytes that fail their check, an output file
that cannot be written.
"""

from __future__ import annotations

import argparse
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .._fsio import atomic_write
from ..dag.store import ArchiveStore, open_store
from ..errors import NodeStoreError
from ..transcripts import sync_paths
from ._output import Progress, display_name, must_exist, note, print_json, write_stdout

__all__ = ["register"]

_STORE_HELP = "node store: SQLite file or postgresql:// URL"
_SYNC_EPILOG = """\
examples:
  merkle-memory dag sync ~/.claude/projects ~/.codex/sessions --store archive.db
  merkle-memory dag sync ~/.gemini/tmp ~/.aider.chat.history.md --store archive.db --json
  merkle-memory dag sync ~/.claude/projects --store 'postgresql:///agents?host=/run/pg'
  crontab: */15 * * * * merkle-memory dag sync ~/.claude/projects --store ~/archive.db -q"""

_RESTORE_EPILOG = """\
examples:
  merkle-memory dag restore --store archive.db ~/.claude/projects/p/abc.jsonl --out abc.jsonl
  merkle-memory dag restore --store archive.db /home/me/s.jsonl --version 1 --out - | less"""

_SESSIONS_EPILOG = """\
examples:
  merkle-memory dag sessions --store archive.db
  merkle-memory dag sessions --store archive.db --json
  merkle-memory dag sessions --store 'postgresql:///agents?host=/run/pg'"""


def _archive(path: str, command: str, *, create: bool) -> ArchiveStore:
    """Open the node store of ``dag sync``, ``dag restore`` or ``dag sessions`` (a SQLite
    file or a ``postgresql://`` URL: both keep the archive).

    Raises:
        NodeStoreError: the store cannot be opened.
    """
    store = open_store(path, create=create)
    if not isinstance(store, ArchiveStore):  # pragma: no cover - a path or URL archives
        store.close()
        raise NodeStoreError(f"dag {command} needs a node store that keeps the archive")
    return store


def run_sync(args: argparse.Namespace) -> int:
    """``dag sync``: archive and import the transcripts under the paths; exit 0 (a path
    that does not exist: ``error: PATH: does not exist``, exit 1, before the store is
    opened or created)."""
    for path in args.paths:
        must_exist(path)
    store = _archive(args.store, "sync", create=True)
    try:
        with Progress.for_args(args, "dag sync") as progress:
            report = sync_paths(args.paths, store, progress=progress.show)
    finally:
        store.close()
    for path, reason in report.skipped_files:
        note(args, display_name(f"skipped {path}: {reason}"))
    for _path, reason in report.failed:
        note(args, display_name(f"archived, not imported: {reason}"))
    if args.json:
        print_json(report.to_dict())
        return 0
    write_stdout(
        f"{report.files} files: {report.new_files} new, {report.updated_files} updated, "
        f"{report.skipped} skipped; {report.new_nodes} new nodes, {report.nodes} in the store\n"
    )
    return 0


def _original(store: ArchiveStore, given: str) -> str:
    """The archived path ``given`` names: as typed made absolute, or with links resolved."""
    known = {a.path for a in store.archived_files()}
    for candidate in (os.path.abspath(given), os.path.realpath(given), given):
        if candidate in known:
            return candidate
    raise NodeStoreError(f"no archived file {os.path.abspath(given)} in {store.location}")


def run_restore(args: argparse.Namespace) -> int:
    """``dag restore``: write the archived bytes back (checked), atomically."""
    store = _archive(args.store, "restore", create=False)
    try:
        path = _original(store, args.original)
        data = b"".join(store.archived_bytes(path, args.version))  # every chunk checked
    finally:
        store.close()
    if args.out == "-":
        write_stdout(data)
        return 0
    target = Path(args.out)
    atomic_write(target, data)  # temp file, fsync, rename, fsync folder
    size = len(data)
    note(args, display_name(f"restored {path} ({size} bytes) to {target}"))
    return 0


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_sessions(args: argparse.Namespace) -> int:
    """``dag sessions``: list the archived files."""
    store = _archive(args.store, "sessions", create=False)
    try:
        files = store.archived_files()
    finally:
        store.close()
    if args.json:
        print_json([{**a.to_dict(), "exists": os.path.exists(a.path)} for a in files])
        return 0
    lines = []
    for a in files:
        fmt = a.format or "(archived)"
        gone = "" if os.path.exists(a.path) else "  [deleted]"
        error = "  [import failed]" if a.error else ""
        lines.append(
            display_name(
                f"{_when(a.last_sync)}  {fmt:<11}  {a.size:>10}  v{a.version:<3} "
                f"{a.nodes:>6} nodes  {a.path}{gone}{error}"
            )
        )
    write_stdout("".join(line + "\n" for line in lines))
    note(args, f"{len(files)} archived files")
    return 0


def _version(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("versions are numbered from 1")
    return value


def register(subparsers: Any) -> None:
    """Add ``dag sync``, ``dag restore`` and ``dag sessions`` to the ``dag`` subparsers."""
    sync = subparsers.add_parser(
        "sync",
        help="archive and import every transcript under folders, incrementally",
        description="Import every transcript under the files and folders given (format "
        "detected per file) into a node store (a SQLite file or a postgresql:// URL), and "
        "archive their raw bytes there. A file unchanged since the last sync is only "
        "stat'ed; a file that grew has only its new part parsed; a rewritten file is "
        "archived as a new version and read again. Each file's bytes, nodes and progress "
        "are written in one transaction, so a killed sync "
        "loses nothing: run it again. Files of no known format are skipped (named on stderr).",
        epilog=_SYNC_EPILOG,
    )
    sync.add_argument("paths", nargs="+", metavar="PATH", help="transcript files and folders")
    sync.add_argument("--store", required=True, metavar="DB", help=_STORE_HELP)
    sync.add_argument("--json", action="store_true", help="print the counts as JSON")
    sync.set_defaults(func=run_sync)

    restore = subparsers.add_parser(
        "restore",
        help="write an archived transcript back, byte for byte",
        description="Write the archived bytes of a synced file (its latest version, or "
        "--version N) to FILE, after checking every chunk against its SHA-256 and the whole "
        "against the version's digest. FILE is replaced atomically; '-' writes to stdout.",
        epilog=_RESTORE_EPILOG,
    )
    restore.add_argument("--store", required=True, metavar="DB", help=_STORE_HELP)
    restore.add_argument("original", metavar="ORIGINAL_PATH", help="the path it was synced from")
    restore.add_argument(
        "--out", required=True, metavar="FILE", help="where to write ('-': stdout)"
    )
    restore.add_argument("--version", type=_version, metavar="N", help="an older version (1-based)")
    restore.set_defaults(func=run_restore)

    sessions = subparsers.add_parser(
        "sessions",
        help="list the transcripts archived in a store",
        description="List the files archived by dag sync: last sync time, format, size, "
        "version, nodes and path ([deleted] when the path no longer exists).",
        epilog=_SESSIONS_EPILOG,
    )
    sessions.add_argument("--store", required=True, metavar="DB", help=_STORE_HELP)
    sessions.add_argument("--json", action="store_true", help="print one JSON document")
    sessions.set_defaults(func=run_sessions)
