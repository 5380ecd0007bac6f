"""Transcript importers: agent session files and request bodies to conversation DAG nodes.

Formats: Claude Code sessions, Anthropic and OpenAI request bodies, Codex rollouts, Letta
agent files, Gemini CLI sessions (JSON and JSONL), Cline task folders and Aider chat
histories. Each format is one module whose :class:`Importer` record (``IMPORTER``) is registered in
:data:`FORMATS` (adding a format = one module plus one entry there). The record provides
``read_file`` and, for a format that is one JSON document, ``read_object``: a line-based
format (Claude Code, Codex) streams its file, a document format (Anthropic, OpenAI, Letta)
gives a shape check and a parser, and the record reads the file, builds the nodes and names
the file in every error. All importers share the rules of :func:`build_nodes` (DESIGN section
3, "Importers"), so one conversation gets the same node ids from every source. Importers
return conversation data only; a Letta agent's core memory blocks become ledger records
through :func:`merkle_memory.transcripts.letta.core_memory_records`, for a caller that wants
them.

Example::

    from merkle_memory.transcripts import import_file
    result = import_file("session.jsonl")          # format detected
    result.format, len(result.nodes), result.skipped

Claude Code files imported together (a main session and its ``agent-*.jsonl`` subagent
files) are linked by :func:`link_sessions` (metadata only: ``parent_tool_use_id``,
``logical_parent``), as ``dag import`` does.

Parsing policy (every format; docs/PERFORMANCE.md, "Parsing policy"): a transcript is
third-party input, not canonical JSON, so files are parsed with the stdlib ``json`` module,
not the strict ``canonical.loads``:

- a key repeated in one JSON object keeps its **last** value, silently (as JavaScript's
  ``JSON.parse`` does; the earlier values are never seen, so they are not hashed);
- ``NaN`` / ``Infinity`` literals parse, but are refused (``TranscriptFormatError``) when
  they reach a kept field (``tool_input``, ``content``, metadata);
- an integer beyond +-(2**53 - 1) in a hashed field is hashed as the nearest double
  (DESIGN section 3);
- a lone UTF-16 surrogate escape is replaced by U+FFFD in Claude Code sessions (where a cut
  ``\\udXXX`` escape is a known artefact) and refused in the other formats;
- fields that are not kept are never checked.

Errors: :func:`import_file` names the file in every ``TranscriptFormatError`` it raises
(``FILE:LINE: ...`` for JSONL formats, ``FILE: ...`` otherwise; ``error.path`` and
``error.line`` say the same, and ``__cause__`` is the error found). A format asked for by
name is checked against the file's shape (the signature detection uses) and refused with
``FILE is not <a letta agent file, ...> (<why>)``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from .._progress import ProgressCallback
from ..dag.store import ArchiveStore, NodeStore
from ..errors import NodeNotFoundError, NodeStoreError, TranscriptFormatError
from . import aider, anthropic, claude_code, cline, codex, gemini, letta, openai
from ._common import ImportResult, RawMessage, build_nodes, open_regular, paused_collector
from ._importer import Importer
from ._links import link_sessions
from ._sniff import request_signs
from ._sync import CHUNK_SIZE, SyncReport
from ._sync import archived_sources as _archived_sources
from ._sync import sync_paths as _sync_paths

__all__ = [
    "CHUNK_SIZE",
    "FORMATS",
    "FORMAT_NAMES",
    "SNIFF_BYTES",
    "SNIFF_LIMIT",
    "ForgetResult",
    "ImportResult",
    "Importer",
    "RawMessage",
    "SyncReport",
    "build_nodes",
    "detect_format",
    "forget_node",
    "import_file",
    "import_object",
    "link_sessions",
    "sync_paths",
]

FORMAT_NAMES: Final[tuple[str, ...]] = (
    "claude-code",
    "anthropic",
    "openai",
    "codex",
    "letta",
    "gemini",
    "cline",
    "aider",
)
"""Every format name the command line accepts (DESIGN section 7), registered or not."""

FORMATS: dict[str, Importer] = {
    claude_code.FORMAT: claude_code.IMPORTER,
    # Specific shapes before generic ones: a Letta agent file has OpenAI-style messages, and
    # the OpenAI request sniffing is the most lenient of all.
    codex.FORMAT: codex.IMPORTER,
    gemini.FORMAT: gemini.IMPORTER,
    cline.FORMAT: cline.IMPORTER,
    aider.FORMAT: aider.IMPORTER,
    letta.FORMAT: letta.IMPORTER,
    anthropic.FORMAT: anthropic.IMPORTER,
    openai.FORMAT: openai.IMPORTER,
}
"""Registered importers by format name; detection tries them in this order."""

SNIFF_BYTES: Final = 65536
"""How many leading bytes of a file format detection reads first (64 KiB)."""

SNIFF_LIMIT: Final = 64 * 1024 * 1024
"""The most leading bytes of a file format detection reads (64 MiB). When no format
recognises the first :data:`SNIFF_BYTES`, detection doubles what it has read and asks again,
until a format recognises it, the file ends, or this cap is reached: a line-based format is
recognised by a complete line (a Claude Code session whose first line holds a pasted file or
an image runs to megabytes), a request body or an agent file by its signs or as a whole
document."""


def detect_format(source: str | Path | Any) -> str:
    """Name the format of a file (by path) or of an already parsed JSON value.

    A file is read from its start, :data:`SNIFF_BYTES` first and then twice as much each
    time no format recognises what was read, up to :data:`SNIFF_LIMIT` (so a first record of
    any size below the cap is seen whole, and a file recognised in its first 64 KiB reads
    no more than that). A ``.jsonl`` file that is empty (or holds only whitespace) is an
    empty transcript: ``"claude-code"`` (it reads as zero nodes; ``dag sync`` detects the
    file again once it holds records). A JSON object with a ``"messages"`` key that no
    format recognised,
    read whole or to the cap (not JSON, or cut without signs), is named ``"openai"``, the
    most lenient format, whose reader then says what is wrong with it.

    A folder holding ``api_conversation_history.json`` is a Cline task folder.

    Args:
        source: a path (``str`` or :class:`~pathlib.Path`), or a parsed JSON value (``dict``
            or ``list``) for single-document formats.

    Returns:
        A key of :data:`FORMATS`.

    Raises:
        TranscriptFormatError: no registered format recognises the source (for a file, in its
            first :data:`SNIFF_LIMIT` bytes).
        OSError: the file cannot be read.
    """
    if isinstance(source, str | Path):
        if cline.is_task_folder(source):  # the one format that is a folder
            return cline.FORMAT
        with open_regular(source) as handle:
            head = handle.read(SNIFF_BYTES)
            jsonl = str(source).lower().endswith(".jsonl")
            if jsonl and not head.strip() and not handle.read(1):
                return claude_code.FORMAT  # an empty JSONL file: an empty transcript
            while True:
                for name, importer in FORMATS.items():
                    if importer.sniff(head):
                        return name
                more = handle.read(min(len(head), SNIFF_LIMIT - len(head)))
                if not more:  # the end of the file, or the cap
                    break
                head += more
        if request_signs(head) is not None:
            # A JSON object with "messages" that nothing recognised, read whole or to the cap:
            # the most lenient reader takes it, and names what is wrong with it.
            return openai.FORMAT
        raise TranscriptFormatError(
            f"cannot detect the transcript format of {source} (known: {', '.join(FORMATS)})",
            path=str(source),
        )
    for name, importer in FORMATS.items():
        if importer.sniff_object is not None and importer.sniff_object(source):
            return name
    raise TranscriptFormatError("cannot detect the transcript format of this object")


def _importer(name: str) -> Importer:
    importer = FORMATS.get(name)
    if importer is None:
        if name in FORMAT_NAMES:
            raise TranscriptFormatError(f"format {name!r} is not available yet")
        raise TranscriptFormatError(f"unknown format {name!r} (known: {', '.join(FORMAT_NAMES)})")
    return importer


def import_file(
    path: str | Path, format: str = "auto", *, progress: ProgressCallback | None = None
) -> ImportResult:
    """Read one transcript file into nodes.

    Args:
        path: the file, a ``str`` or ``os.PathLike``.
        format: a name of :data:`FORMAT_NAMES`, or ``"auto"`` to detect it.
        progress: optional ``progress(phase, done, total)`` callback
            (``merkle_memory._progress``): phase ``"reading"``, in bytes, for the line-based
            formats (Claude Code, Codex).

    Returns:
        An :class:`ImportResult` (``path`` set to ``str(path)``).

    Raises:
        TranscriptFormatError: ``path`` is not a ``str`` or ``os.PathLike``, an unknown or
            unavailable format, a format that cannot be detected, a file whose shape is not
            the format asked for (``FILE is not a letta agent file (...)``: every importer
            checks its format's signature, as detection does), or content the importer
            cannot read. Every such error about the file names
            it: its text starts ``FILE: `` or, for a line-based format, ``FILE:LINE: ``
            (1-based line), ``error.path`` and ``error.line`` say the same, and the error
            found is kept as ``__cause__``.
        OSError: the file cannot be read (missing, a directory, no permission).

    Python's cyclic garbage collector is paused while the file is read, and enabled again
    afterwards if it was enabled (``transcripts._common.paused_collector``).
    """
    if not isinstance(path, str | os.PathLike):
        raise TranscriptFormatError(
            f"the transcript path must be a str or os.PathLike, not {type(path).__name__}"
        )
    name = detect_format(path) if format == "auto" else format
    with paused_collector():  # an import frees almost nothing: see paused_collector
        return _importer(name).read_file(path, progress=progress)


def import_object(value: Any, format: str = "auto") -> ImportResult:
    """Read an already parsed single-document transcript (a request body, an agent file).

    Raises:
        TranscriptFormatError: an unknown format, one that is not a single document, a value
            no format recognises or whose shape is not the format asked for (``not a letta
            agent file (...)``), or content the importer cannot read.
    """
    name = detect_format(value) if format == "auto" else format
    return _importer(name).read_object(value)


def sync_paths(
    paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
    store: ArchiveStore,
    *,
    progress: Callable[[str], None] | None = None,
) -> SyncReport:
    """Archive and import every transcript under ``paths`` into ``store``, incrementally
    (``merkle-memory dag sync``).

    Each regular file (folders are walked recursively, symbolic links are not followed) whose
    device, inode, size and modification time the store remembers is only stat'ed. Any other
    is read once: a file seen for the first time or rewritten (its consumed prefix changed) is
    archived and imported whole, a file that grew has its new bytes archived and only its
    open tail and new lines parsed. The bytes, the nodes and the progress of each file are
    written in one transaction, so a killed sync loses or duplicates nothing, and
    after any number of syncs the store holds the nodes one import of each file would give.
    See ``docs/CLI.md`` (``dag sync``) and ``docs/FORMAT.md`` section 13.

    Args:
        paths: files and folders (one path may be given alone).
        store: a node store that keeps the archive (:func:`~merkle_memory.dag.open_store`
            with a path or a ``postgresql://`` URL).
        progress: called with each path before it is looked at.

    Returns:
        A :class:`SyncReport` (``to_dict()`` is the ``dag sync --json`` document).

    Raises:
        TranscriptFormatError: ``paths`` is not a path or an iterable of paths (``str`` or
            ``os.PathLike``; ``bytes`` are refused: give ``os.fsdecode(name)``).
        NodeStoreError: ``store`` is not an :class:`~merkle_memory.dag.store.ArchiveStore`
            (the in-memory store keeps no archive), or it cannot be read or written (every
            batch of files committed before stays committed).
    """
    if not isinstance(store, ArchiveStore):
        raise NodeStoreError(
            f"dag sync needs a node store that keeps the archive (SQLite or PostgreSQL), "
            f"not {type(store).__name__}"
        )
    return _sync_paths(_sync_targets(paths), store, FORMATS, detect_format, progress=progress)


def _sync_targets(paths: object) -> list[str]:
    """The paths given to :func:`sync_paths`, each as ``str``.

    Raises:
        TranscriptFormatError: ``paths`` is neither a path nor an iterable of paths, or one
            of them is not a ``str`` or a ``str`` ``os.PathLike`` (``bytes`` included: give
            ``os.fsdecode(name)``, which keeps every byte).
    """
    if isinstance(paths, str | os.PathLike):
        given: list[object] = [paths]
    elif isinstance(paths, bytes | bytearray | memoryview) or not isinstance(paths, Iterable):
        raise TranscriptFormatError(
            f"paths to sync must be a path or an iterable of paths, not {type(paths).__name__}"
        )
    else:
        given = list(paths)
    out: list[str] = []
    for item in given:
        text = os.fspath(item) if isinstance(item, str | os.PathLike) else item
        if not isinstance(text, str):
            raise TranscriptFormatError(
                f"a path to sync must be a str or os.PathLike, not {type(item).__name__}"
            )
        if "\0" in text:
            raise TranscriptFormatError(f"a path to sync holds a NUL character: {text!r}")
        out.append(text)
    return out


@dataclass(frozen=True, slots=True)
class ForgetResult:
    """What :func:`forget_node` did.

    Attributes:
        hash: the node's full hash, 64-char lowercase hex.
        pruned: ``True`` when pruned now, ``False`` when it already was.
        purged: ``(path, 1-based version)`` of each archived version deleted with it.
    """

    hash: str
    pruned: bool
    purged: tuple[tuple[str, int], ...]


def forget_node(store: NodeStore, node_hash: str, reason: str = "") -> ForgetResult:
    """Forget a node (``dag forget``): prune its content and, in a store that archives
    transcripts (``dag sync``), delete in the same transaction every archived version of a
    file whose import gives the node (:meth:`~merkle_memory.dag.store.ArchiveStore.forget`
    with ``purge``).

    Versions that hold the same text without giving this node (the words quoted in another
    message, another history) are not touched, nor the transcript files themselves: a file
    that still holds the text is archived again by its next sync if it changed.

    Raises:
        NodeNotFoundError: no such node.
        NodeStoreError: the store cannot forget, be read or be written (nothing changes).
    """
    node = store.get(node_hash)
    if node is None:
        raise NodeNotFoundError(f"no node {node_hash} in the store", node_hash)
    if not isinstance(store, ArchiveStore):
        return ForgetResult(node.hash, store.forget(node.hash, reason), ())
    if store.is_pruned(node.hash):
        return ForgetResult(node.hash, store.forget(node.hash, reason, purge=()), ())
    sources = _archived_sources(store, node, FORMATS, detect_format)
    done = store.forget(node.hash, reason, purge=sources)
    return ForgetResult(node.hash, done, sources)
