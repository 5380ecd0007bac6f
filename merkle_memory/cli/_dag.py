"""``merkle-memory dag import``: transcripts to one conversation DAG forest (DESIGN section 7).

``dag import FILE... [--format auto|claude-code|anthropic|openai|codex|letta] [--store DB]
[--json]`` reads every file (format detected per file with ``auto``) into one forest of nodes.
With ``--json`` it prints one document (keys are DESIGN section 7, MUST)::

    {"format": NAME | "mixed", "files": [{"path", "format", "messages", "skipped"}, ...],
     "messages": int, "skipped": int, "nodes": int,
     "roots": [HASH, ...], "leaves": [HASH, ...], "branch_points": [HASH, ...]}

``messages`` counts message records read, ``skipped`` records that are not messages,
``nodes`` distinct nodes; the hash lists are in order of first appearance. Without ``--json``
a short summary goes to stdout. ``--show-skipped`` also lists each skipped record of a
line-based format: ``skipped FILE:LINE: why`` lines after the summary, or with ``--json`` a
``skipped_lines`` list (``[{"line", "reason"}]``) in each ``files`` entry. ``--store DB``
also writes every node to the SQLite node store ``DB`` (created if missing), in one
transaction; the count of new nodes goes to stderr (silenced by ``-q``). Claude Code files
imported together are linked first: the root of a subagent conversation gets
``parent_tool_use_id`` and the first node after a compact boundary ``logical_parent`` in its
metadata (not hashed; ``dag show`` displays both). On a terminal a progress line counts the
files read (and the bytes of a big line-based file) and the nodes stored.

Exit 0 ok; 1 for a missing or unreadable file, content that is not a transcript of the format,
a format that cannot be detected or is not available.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
from typing import Any

from .._pg import is_url
from ..dag import Forest, open_store
from ..transcripts import FORMAT_NAMES, ImportResult, import_file, link_sessions
from ._output import Progress, display_name, must_exist, note, plural, print_json

__all__ = ["import_summary", "register"]


_IMPORT_EPILOG = """\
examples:
  merkle-memory dag import session.jsonl --show-skipped
  merkle-memory dag import ~/.claude/projects/*/*.jsonl --store dag.db --json
  merkle-memory dag import session.jsonl --store 'postgresql:///agents?host=/run/pg'"""


def register(subparsers: Any) -> None:
    """Add ``import`` to the ``dag`` subcommands."""
    parser = subparsers.add_parser(
        "import",
        help="import transcripts into one conversation DAG and summarise it",
        description="Read agent transcripts (every file, format detected per file with "
        "auto) into one Merkle DAG forest and print its summary: messages read, records "
        "skipped, distinct nodes, roots, leaves and branch points. --store also writes the "
        "nodes to a node store (SQLite file or postgresql:// URL) in one transaction.",
        epilog=_IMPORT_EPILOG,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="transcript files")
    parser.add_argument(
        "--format",
        default="auto",
        choices=("auto", *FORMAT_NAMES),
        help="source format (default: detect per file)",
    )
    parser.add_argument(
        "--store",
        metavar="DB",
        help="also store the nodes in this SQLite file or postgresql:// database",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument(
        "--show-skipped",
        action="store_true",
        help="also list each skipped record (FILE:LINE and why); with --json as skipped_lines",
    )
    parser.set_defaults(func=_run_import)


def import_summary(results: list[ImportResult], forest: Forest) -> dict[str, Any]:
    """The ``dag import --json`` document for ``results`` added to ``forest`` in order.

    Returns:
        ``{"format", "files", "messages", "skipped", "nodes", "roots", "leaves",
        "branch_points"}`` (DESIGN section 7).
    """
    formats = {r.format for r in results}
    return {
        "format": formats.pop() if len(formats) == 1 else "mixed",
        "files": [
            {"path": r.path, "format": r.format, "messages": r.messages, "skipped": r.skipped}
            for r in results
        ],
        "messages": sum(r.messages for r in results),
        "skipped": sum(r.skipped for r in results),
        "nodes": forest.size(),
        "roots": [n.hash for n in forest.roots()],
        "leaves": [n.hash for n in forest.leaves()],
        "branch_points": [n.hash for n in forest.branch_points()],
    }


def _run_import(args: argparse.Namespace) -> int:
    if args.store is not None and not is_url(args.store):  # created if missing, not its folder
        must_exist(os.path.dirname(args.store) or ".")
    results: list[ImportResult] = []
    forest = Forest()
    with Progress.for_args(args, "dag import", total=len(args.files)) as progress:
        for path in args.files:
            progress.show(path)
            result = import_file(path, args.format, progress=progress.reporter(path))
            results.append(dataclasses.replace(result, path=path))
            progress.advance()
    # Subagent and compact-boundary links (metadata only, hashes unchanged) need every file.
    results = link_sessions(results)
    for result in results:
        for node in result.nodes:
            forest.add(node)
    if args.store is not None:
        with (
            open_store(args.store) as store,
            Progress.for_args(args, f"storing in {args.store}", forest.size()) as progress,
        ):
            new = store.put_many(progress.wrap(node.node for node in forest))
        note(args, f"stored {plural(new, 'new node')} in {args.store}")
    summary = import_summary(results, forest)
    if args.json:
        if args.show_skipped:
            for entry, result in zip(summary["files"], results, strict=True):
                entry["skipped_lines"] = [
                    {"line": line, "reason": why} for line, why in result.skipped_lines
                ]
        print_json(summary)
        return 0
    print(
        f"{plural(len(results), 'file')} ({summary['format']}): "
        f"{plural(summary['messages'], 'message')}, {summary['skipped']} skipped -> "
        f"{plural(summary['nodes'], 'node')}, {plural(len(summary['roots']), 'root')}, "
        f"{plural(len(summary['leaves']), 'leaf')}, "
        f"{plural(len(summary['branch_points']), 'branch point')}"
    )
    for leaf in summary["leaves"]:
        print(f"leaf {leaf}")
    if args.show_skipped:
        for result in results:
            for line, why in result.skipped_lines:
                print(display_name(f"skipped {result.path}:{line}: {why}"))
    return 0
