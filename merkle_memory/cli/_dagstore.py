"""``merkle-memory dag show`` and ``dag verify``: reading a node store (DESIGN section 7).

``--store`` takes a SQLite file or a ``postgresql://`` URL (libpq's URI form, no fragment).

``dag show HASH --store DB [--json]`` prints the ancestry of one node, root first: one line per
node with its hash, its role and the first line of its text (after projection), followed by
``[parent_tool_use_id: ID]`` when the node is the root of a subagent conversation started by
a Task tool call, and ``[logical_parent: HASH]`` when a compact boundary links it to the turn
before the compaction. HASH may be a unique prefix of 4 or more hex digits. With ``--json``
the document is::

    {"hash": HASH, "complete": bool, "missing_parent": HASH | null, "cycle": bool,
     "nodes": [{"hash", "parent_hash", "role", "text", "parent_tool_use_id",
                "logical_parent", "model"}, ...]}        # root first; absent values null

``dag verify --store DB [--json]`` recomputes every node hash from its stored bucket and
parent, reads every row back as ``dag show`` does (bucket, metadata, hash and parent hash
shapes; the role column against the bucket) and checks every parent link; with ``--json`` it
prints :meth:`~merkle_memory.dag.store.StoreReport.to_dict`::

    {"ok": bool, "nodes": int, "roots": int,
     "mismatches": [{"hash", "computed", "reason"}], "unreadable": [{"hash", "reason"}],
     "dangling": [{"hash", "parent_hash"}], "cycles": [[HASH, ...]]}

plus ``"pruned": [HASH, ...]`` when nodes were pruned (``dag forget``: content forgotten, hash
kept; not a failure). ``dag show`` marks a pruned node ``(pruned)`` (``"pruned": true`` in
its JSON node object when pruned).

Exit codes: 0 ok; 1 when the store fails verification (so a store that ``dag show`` cannot
read never verifies), the ancestry is incomplete (a missing parent or a cycle), the node is
unknown or unreadable, or the store cannot be opened.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..dag import Node
from ..dag.store import Ancestry, open_store, verify_store
from ..projection import project_content
from ._output import Progress, error, hex_prefix, must_exist, one_line, plural, print_json

__all__ = ["first_line", "register"]

_PREVIEW_CHARS = 120


def first_line(node: Node) -> str:
    """A one-line preview of a node: the first line of its first projected text.

    Projected content is used, so harness tags never show. A block without text is shown by
    kind: ``[tool_use NAME]``, ``[tool_result] first line of output``, ``[thinking] ...``,
    ``[image]``, ``[TYPE]``. An empty node gives ``""``.
    """
    for block in project_content(node.bucket.content):
        if block.text:
            return block.text.split("\n", 1)[0]
        if block.type in ("tool_use", "server_tool_use"):
            name = f" {block.tool_name}" if block.tool_name else ""
            return f"[{block.type}{name}]"
        if block.tool_output or block.type == "tool_result":
            error = " error" if block.is_error else ""
            return f"[tool_result{error}] {block.tool_output.split(chr(10), 1)[0]}".rstrip()
        if block.thinking:
            return "[thinking] " + block.thinking.split("\n", 1)[0]
        return f"[{block.type}]"
    return ""


def _meta_str(node: Node, key: str) -> str | None:
    value = node.metadata.get(key)
    return value if isinstance(value, str) and value else None


def _node_json(node: Node, pruned: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "hash": node.hash,
        "parent_hash": node.parent_hash,
        "role": node.bucket.role,
        "text": first_line(node),
        "parent_tool_use_id": _meta_str(node, "parent_tool_use_id"),
        "logical_parent": _meta_str(node, "logical_parent"),
        "model": node.bucket.model,
    }
    if pruned:
        out["pruned"] = True
    return out


def _incomplete(found: Ancestry) -> str | None:
    if found.missing_parent is not None:
        return f"ancestry is incomplete: parent {found.missing_parent} is not in the store"
    if found.cycle:
        return "ancestry runs into a cycle of parent links"
    return None


def run_show(args: argparse.Namespace) -> int:
    """``dag show``: print the ancestry of a node, root first; 1 if it is incomplete."""
    must_exist(args.store)
    with open_store(args.store, create=False) as store:
        target = store.resolve(args.hash)
        found = store.ancestry(target)
        pruned = {node.hash for node in found.nodes if store.is_pruned(node.hash)}
    nodes = list(reversed(found.nodes))
    if args.json:
        doc = {
            "hash": target,
            "complete": found.complete,
            "missing_parent": found.missing_parent,
            "cycle": found.cycle,
            "nodes": [_node_json(node, node.hash in pruned) for node in nodes],
        }
        print_json(doc)
    else:
        for node in nodes:
            line = "(pruned)" if node.hash in pruned else one_line(first_line(node))
            if len(line) > _PREVIEW_CHARS:
                line = line[: _PREVIEW_CHARS - 3] + "..."
            extra = ""
            link = _meta_str(node, "parent_tool_use_id")
            if link:
                extra += f"  [parent_tool_use_id: {link}]"
            logical = _meta_str(node, "logical_parent")
            if logical:
                extra += f"  [logical_parent: {logical}]"
            text = one_line(f"{node.hash}  {node.bucket.role:<9}  ") + line + one_line(extra)
            sys.stdout.write(text + "\n")
    problem = _incomplete(found)
    if problem is not None:
        error(problem)
        return 1
    return 0


def run_verify(args: argparse.Namespace) -> int:
    """``dag verify``: recompute every hash and check parent links; 1 if anything is wrong."""
    must_exist(args.store)
    with (
        open_store(args.store, create=False) as store,
        Progress.for_args(args, "dag verify") as progress,
    ):
        report = verify_store(store, progress=progress.reporter())
    if args.json:
        print_json(report.to_dict())
    else:
        for mismatch in report.mismatches:
            computed = f" (computed {mismatch.computed})" if mismatch.computed else ""
            sys.stdout.write(
                one_line(f"mismatch  {mismatch.hash}: {mismatch.reason}{computed}") + "\n"
            )
        for bad in report.unreadable:
            sys.stdout.write(one_line(f"unreadable  {bad.hash}: {bad.reason}") + "\n")
        for dangling in report.dangling:
            sys.stdout.write(
                one_line(f"dangling  {dangling.hash}: parent {dangling.parent_hash} absent") + "\n"
            )
        for cycle in report.cycles:
            sys.stdout.write(one_line(f"cycle     {' -> '.join(cycle)}") + "\n")
        for pruned in report.pruned:
            sys.stdout.write(f"pruned    {pruned} (content forgotten)\n")
        status = "ok" if report.ok else "FAILED"
        sys.stdout.write(
            f"{status}: {plural(report.nodes, 'node')}, {plural(report.roots, 'root')}\n"
        )
    if report.ok:
        return 0
    error(
        f"node store failed verification: {len(report.mismatches)} hash mismatch(es), "
        f"{len(report.unreadable)} unreadable row(s), "
        f"{len(report.dangling)} dangling parent(s), {len(report.cycles)} cycle(s)"
    )
    return 1


_STORE_HELP = "node store: SQLite file or postgresql:// URL"

_SHOW_EPILOG = """\
examples:
  merkle-memory dag import session.jsonl --store dag.db
  merkle-memory dag show 3f2a9c --store dag.db
  merkle-memory dag show 3f2a9c --store dag.db --json"""

_VERIFY_EPILOG = """\
examples:
  merkle-memory dag verify --store dag.db
  merkle-memory dag verify --store dag.db --json -q
  merkle-memory dag verify --store 'postgresql:///agents?host=/run/pg'"""


def register(subparsers: Any) -> None:
    """Add ``dag show`` and ``dag verify`` to the ``dag`` subparsers."""
    show = subparsers.add_parser(
        "show",
        help="print the ancestry of a node in a node store",
        description="Print the ancestry of a node, root first: hash, role and the first line "
        "of text of each node (plus parent_tool_use_id for subagent roots). Exit 1 if the "
        "node is unknown or its ancestry is incomplete.",
        epilog=_SHOW_EPILOG,
    )
    show.add_argument(
        "hash", metavar="HASH", type=hex_prefix, help="node hash, or a unique prefix (>= 4 hex)"
    )
    show.add_argument("--store", required=True, metavar="DB", help=_STORE_HELP)
    show.add_argument("--json", action="store_true", help="print one JSON document")
    show.set_defaults(func=run_show)

    verify = subparsers.add_parser(
        "verify",
        help="recompute every node hash of a node store and check its parent links",
        description="Recompute every node hash from its stored bucket and parent and read "
        "every stored row back as dag show does; report mismatches, unreadable rows, dangling "
        "parents and cycles. Exit 1 if there is any.",
        epilog=_VERIFY_EPILOG,
    )
    verify.add_argument("--store", required=True, metavar="DB", help=_STORE_HELP)
    verify.add_argument("--json", action="store_true", help="print one JSON document")
    verify.set_defaults(func=run_verify)
