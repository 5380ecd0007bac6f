"""Private: ``dag sync``, incremental import of transcript folders into an archiving store.

:func:`sync_paths` walks files and folders, and for each regular file:

1. **Stat only** when the store remembers it with the same device, inode, size and
   modification time: nothing is read.
2. Otherwise it reads the file once, hashing it, and compares the digest of the bytes
   consumed last time (``[0, size)``) with the one remembered: the same prefix means the file
   grew (**appended**), another one that it was **rewritten** (a new version, read from its
   start; so is a file seen for the first time).
3. It parses only the part that can have changed: from the *cut* of the last sync (the start
   of the file's open tail, see below) to the end. The importer of the file's format reads
   that part alone (the lines before it become blank lines, so line numbers stay those of the
   file); the hashes of the keys before the cut come from the store (``sync_keys``, for a
   format whose lines name their parents: Claude Code) or the chain continues from the
   remembered node (Codex, Gemini CLI JSONL, Aider). A whole-document format (a JSON
   session, a request body, a Cline history) is read whole.
4. It writes, in one transaction (:meth:`ArchiveStore.sync_files`), the new bytes as
   compressed chunks, the nodes, the keys, the new cut and the file's digest, so a kill at any
   point loses or duplicates nothing: the next sync redoes exactly what was not committed.

The **open tail** of a file is the part a later write may still change: the last node (a
message still streaming may gain blocks), an assistant turn whose tool calls are not all
answered and the results after it (Claude Code; later results join them), and, for Aider, the
last user turn (its reply is text up to the next user line). Its nodes are *provisional*: the
next sync parses the tail again, and a provisional node it no longer produces is deleted
(unless another file's tail or an import holds it; after a rewrite, only when the new version
still gives its parent). So after any number of syncs of a growing file the store holds
exactly the nodes of one import of the whole file, and a rewritten file keeps the nodes of its
old version's history.

Each update carries the ``files`` row it was computed from (``FileUpdate.base``): when another
sync committed the file first, the update is dropped and not counted. :func:`archived_sources`
finds the archived versions whose import gives a node (``dag forget`` purges them).

A Cline task folder's ``api_conversation_history.json`` is imported (with its
``ui_messages.json``), the other two files of the folder are archived only. Files that no
format recognises are skipped, with the reason. Symbolic links are not followed, and the
store's own files are never read.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Final

from .._fsio import write_all
from ..dag import Node
from ..dag.store import ArchiveStore, FileState, FileUpdate
from ..errors import MerkleMemoryError, TranscriptFormatError
from . import aider, claude_code, cline, codex, gemini
from ._common import (
    Continuation,
    ImportResult,
    build_result,
    continuing,
    open_regular,
    read_regular,
)
from ._importer import Importer

__all__ = ["CHUNK_SIZE", "SyncReport", "archived_sources", "sync_paths"]

CHUNK_SIZE: Final = 256 * 1024
"""Archived bytes are stored in chunks of at most this many bytes (256 KiB), cut at multiples
of it in the file, so equal regions of two files or versions are stored once."""

_READ: Final = 1024 * 1024
_KEYED: Final = frozenset({claude_code.FORMAT})
"""Formats whose lines name their parents (the keys of earlier lines are remembered)."""
_CHAINS: Final = frozenset({codex.FORMAT, aider.FORMAT, gemini.FORMAT})
"""Line-based formats that are one chain (Gemini CLI in its JSONL form only)."""
_CONTEXT_LINES: Final = {codex.FORMAT: re.compile(rb'"type"\s*:\s*"turn_context"')}
"""Lines before the cut that the importer needs again (the model of a Codex turn)."""
_ARCHIVE_ONLY: Final = frozenset(cline.TASK_FILES[1:])
_NEW_FILE: Final = (0, 0, "")
"""``FileUpdate.base`` of a file the store did not know (the store's ``NEW_FILE``)."""


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What one :func:`sync_paths` run did.

    Attributes:
        files: regular files found under the paths given.
        new_files: files this run archived for the first time (a file another sync run
            committed first, while this one read it, is counted by that run only).
        updated_files: archived files whose bytes changed since their last sync (committed
            by this run).
        skipped: files not archived, with ``skipped_files`` saying why (no known format,
            unreadable, a symbolic link, changed while read).
        new_nodes: nodes this run added to the store.
        nodes: nodes in the store after the run.
        skipped_files: ``(path, reason)`` of each skipped file.
        failed: ``(path, error)`` of archived files whose import failed (their bytes are kept;
            the next change of the file tries again).
    """

    files: int = 0
    new_files: int = 0
    updated_files: int = 0
    skipped: int = 0
    new_nodes: int = 0
    nodes: int = 0
    skipped_files: tuple[tuple[str, str], ...] = ()
    failed: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, int]:
        """``{"files", "new_files", "updated_files", "skipped", "new_nodes", "nodes"}``, the
        document ``dag sync --json`` prints."""
        return {
            "files": self.files,
            "new_files": self.new_files,
            "updated_files": self.updated_files,
            "skipped": self.skipped,
            "new_nodes": self.new_nodes,
            "nodes": self.nodes,
        }


@dataclass(slots=True)
class _Tally:
    files: int = 0
    new_files: int = 0
    updated_files: int = 0
    new_nodes: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)


_BATCH_FILES: Final = 64
_BATCH_BYTES: Final = 16 * 1024 * 1024


class _Batch:
    """Updates written together: one transaction (one fsync) for up to :data:`_BATCH_FILES`
    files or :data:`_BATCH_BYTES` of new bytes. Each file's bytes, nodes and progress are in
    the same transaction; a kill loses the whole batch or nothing of it."""

    def __init__(self, store: ArchiveStore, tally: _Tally) -> None:
        self.store = store
        self.tally = tally
        self.updates: list[FileUpdate] = []
        self.pending: list[tuple[str, str | None]] = []
        self.size = 0

    def add(self, update: FileUpdate, what: str, error: str | None) -> None:
        """Queue one file's update; ``what`` (``"new"``, ``"updated"``, ``"same"``) and its
        import error are counted only when it is committed."""
        self.updates.append(update)
        self.pending.append((what, error))
        self.size += sum(len(data) for _offset, data in update.chunks)
        if len(self.updates) >= _BATCH_FILES or self.size >= _BATCH_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.updates:
            written = self.store.sync_files(self.updates)
            for update, (what, error), new in zip(self.updates, self.pending, written, strict=True):
                if new is None:
                    continue  # another sync committed this file first: it counted it
                self.tally.new_nodes += new
                if what == "new":
                    self.tally.new_files += 1
                elif what == "updated":
                    self.tally.updated_files += 1
                if error is not None:
                    self.tally.failed.append((update.path, error))
        self.updates, self.pending, self.size = [], [], 0


class _Skip(Exception):
    """A file that is not archived, with the reason."""


# --- walking ----------------------------------------------------------------------------------


def _walk(
    paths: Sequence[str | os.PathLike[str]],
) -> Iterator[tuple[str, os.stat_result | None, str | None]]:
    """Every file under ``paths`` (sorted, folders recursively, links not followed), as
    ``(absolute path, its lstat, why it is skipped or None)``: one ``lstat`` per file."""
    for given in paths:
        top = os.path.abspath(os.fspath(given))
        try:
            info = os.stat(top)
        except OSError as exc:
            yield top, None, f"cannot read: {exc.strerror or exc}"
            continue
        if not stat.S_ISDIR(info.st_mode):
            yield top, info, None
            continue
        yield from _walk_folder(top)


def _walk_folder(top: str) -> Iterator[tuple[str, os.stat_result | None, str | None]]:
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda e: e.name)
        except OSError as exc:
            yield folder, None, f"cannot read: {exc.strerror or exc}"
            continue
        folders = []
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    folders.append(entry.path)
                    continue
                if entry.is_symlink():
                    yield entry.path, None, "a symbolic link (not followed)"
                    continue
                yield entry.path, entry.stat(follow_symlinks=False), None
            except OSError as exc:
                yield entry.path, None, f"cannot read: {exc.strerror or exc}"
        stack.extend(reversed(folders))


def _task_role(path: str) -> str | None:
    """``"api"`` for a Cline task's API file, ``"sidecar"`` for its other files, else None."""
    folder, name = os.path.split(path)
    if name == cline.API_FILE:
        return "api"
    if name in _ARCHIVE_ONLY and os.path.isfile(os.path.join(folder, cline.API_FILE)):
        return "sidecar"
    return None


# --- reading ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _Read:
    """One read of a file: its stat, the digest of all of it and of the old prefix, the bytes
    from ``start`` on."""

    info: os.stat_result
    size: int
    digest: str
    prefix_digest: str | None
    start: int
    data: bytes


def _read(path: str, prefix: int, start: int) -> _Read:
    """Read a regular file once: hash all of it (and ``[0, prefix)`` on the way), keep the
    bytes from ``start`` (``<= prefix`` when prefix is given) on.

    Raises:
        _Skip: not a regular file, or it shrank while being read.
        OSError: it cannot be read.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Skip("not a regular file")
        size = info.st_size
        whole = hashlib.sha256()
        prefix_digest: str | None = None
        kept: list[bytes] = []
        offset = 0
        while offset < size:
            want = min(_READ, size - offset)
            if offset < prefix < offset + want:
                want = prefix - offset  # stop at the prefix to take its digest
            block = os.pread(fd, want, offset)
            if not block:
                raise _Skip("it shrank while being read")
            whole.update(block)
            end = offset + len(block)
            if end > start:
                kept.append(block[max(start - offset, 0) :])
            offset = end
            if offset == prefix:
                prefix_digest = whole.hexdigest()
        if prefix == 0:
            prefix_digest = hashlib.sha256().hexdigest()
        return _Read(info, size, whole.hexdigest(), prefix_digest, start, b"".join(kept))
    finally:
        os.close(fd)


def _chunks(start: int, data: bytes) -> tuple[tuple[int, bytes], ...]:
    """``data`` (the file's bytes from ``start``) cut at multiples of :data:`CHUNK_SIZE`."""
    out: list[tuple[int, bytes]] = []
    position = 0
    while position < len(data):
        absolute = start + position
        end = min(len(data), position + CHUNK_SIZE - absolute % CHUNK_SIZE)
        out.append((absolute, data[position:end]))
        position = end
    return tuple(out)


def _line_start(data: bytes, lines: int) -> int:
    """The offset in ``data`` where its line number ``lines`` (0-based) starts."""
    position = 0
    for _ in range(lines):
        found = data.find(b"\n", position)
        if found < 0:
            return len(data)
        position = found + 1
    return position


# --- importing a part of a file ---------------------------------------------------------------


@contextlib.contextmanager
def _scratch(data: bytes) -> Iterator[str]:
    """A path whose file holds ``data``: an anonymous memory file where the system has them
    (nothing is left behind by a kill), else a temporary file."""
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is not None and os.path.isdir("/proc/self/fd"):
        fd = memfd_create("merkle-memory-sync", getattr(os, "MFD_CLOEXEC", 0))
        try:
            os.write(fd, data) if len(data) < (1 << 30) else write_all(fd, data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    handle, name = tempfile.mkstemp(prefix="merkle-memory-sync-")
    try:
        write_all(handle, data)
        os.close(handle)
        yield name
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)


@dataclass(frozen=True, slots=True)
class _Registry:
    """The importers by format name, and format detection (from the package's face)."""

    importers: Mapping[str, Importer]
    detect: Callable[[str], str]


def _import(registry: _Registry, fmt: str, path: str, padded: bytes) -> ImportResult:
    """Import ``padded`` (the file's bytes, or its part after blank lines) as ``fmt``; errors
    name ``path``."""
    if fmt == cline.FORMAT:
        try:
            history = json.loads(padded.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            raise TranscriptFormatError(f"{path}: not JSON ({exc})", path=path) from exc
        folder = Path(path).parent
        try:
            ui = json.loads(read_regular(folder / cline.UI_FILE))
        except (OSError, TranscriptFormatError, ValueError, RecursionError):
            ui = None
        try:
            records = cline.parse_history(history, ui)
            return build_result(fmt, records, len(history), path=path)
        except MerkleMemoryError as exc:
            raise TranscriptFormatError(f"{path}: {exc}", path=path) from exc
    with _scratch(padded) as scratch:
        try:
            return registry.importers[fmt].read_file(scratch)
        except TranscriptFormatError as exc:
            text = str(exc).replace(scratch, path)
            raise TranscriptFormatError(text, path=path, line=exc.line) from exc


def _position(node: Node) -> int | None:
    """The source line (or message index) where a node starts."""
    lines = node.metadata.get("lines")
    if isinstance(lines, list) and lines and all(type(x) is int for x in lines):
        return int(min(lines))
    for key in ("line", "index"):
        value = node.metadata.get(key)
        if type(value) is int:
            return value
    return None


def _uses(node: Node) -> set[str]:
    return {
        b.tool_use_id
        for b in node.bucket.content
        if b.tool_use_id and b.type in ("tool_use", "server_tool_use", "mcp_tool_use")
    }


def _tail_line(fmt: str, nodes: Sequence[Node]) -> int | None:
    """The first line of the file's open tail (module docstring), or ``None`` (no nodes)."""
    heads = {n.hash: p for n in nodes if (p := _position(n)) is not None}
    if not heads:
        return None
    last = max(nodes, key=lambda n: heads.get(n.hash, -1))
    candidates = [heads[last.hash]]
    if fmt == aider.FORMAT:
        users = [heads[n.hash] for n in nodes if n.bucket.role == "user" and n.hash in heads]
        candidates.extend(users[-1:])
    if fmt in _KEYED:  # a turn still waiting for results (they may join it)
        answered = {b.tool_result_id for n in nodes for b in n.bucket.content if b.tool_result_id}
        for node in nodes:
            if node.hash in heads and not _uses(node) <= answered:
                candidates.append(heads[node.hash])
    cut = min(candidates)
    spans = [
        (min(lines), max(lines))
        for n in nodes
        if isinstance(lines := n.metadata.get("lines"), list) and lines
    ]
    # Results in the tail keep the turn they answer with them (more results may join it).
    answering = [
        (heads[n.hash], heads[n.parent_hash])
        for n in nodes
        if n.parent_hash in heads
        and n.hash in heads
        and n.bucket.content
        and all(b.type == "tool_result" for b in n.bucket.content)
    ]
    moved = True
    while moved:  # a node whose lines straddle the cut is in the tail whole
        moved = False
        for first, last_line in spans:
            if first < cut <= last_line:
                cut, moved = first, True
        for head, parent in answering:
            if head >= cut > parent:
                cut, moved = parent, True
    return cut


# --- one file ---------------------------------------------------------------------------------


def _kind(fmt: str | None, data: bytes) -> str:
    """``"keyed"``, ``"chain"``, ``"document"`` or ``"archive"`` (no import)."""
    if fmt is None:
        return "archive"
    if fmt in _KEYED:
        return "keyed"
    if fmt in _CHAINS:
        if fmt != gemini.FORMAT:
            return "chain"
        first = next((line for line in data.split(b"\n", 64) if line.strip()), b"")
        return "chain" if gemini.is_line_form(first.lstrip(b"\xef\xbb\xbf")) else "document"
    return "document"


def _sync_one(
    store: ArchiveStore,
    path: str,
    state: FileState | None,
    registry: _Registry,
    now: float,
) -> tuple[str, FileUpdate, str | None]:
    """Read and parse one changed or new file. Returns ``(what, the update to write, import
    error)`` with ``what`` one of ``"new"``, ``"updated"``, ``"same"`` (only its stat
    changed).

    Raises:
        _Skip: the file is not archived (no known format, not regular, ...).
        OSError: it cannot be read.
    """
    resume: Mapping[str, Any] = state.resume if state is not None else {}
    prefix = state.size if state is not None else 0
    if state is None:
        start = 0
    elif resume.get("kind") in ("keyed", "chain") and not resume.get("error"):
        start = min(int(resume.get("cut", 0)), prefix)  # the open tail on
    elif resume.get("kind") == "archive":
        start = prefix  # only the appended bytes are needed
    else:
        start = 0  # a document is read whole
    read = _read(path, prefix, start)
    if state is not None and read.prefix_digest == state.digest and read.size == state.size:
        return "same", _same(state, read, now), None  # touched, or put back: the same bytes
    appended = state is not None and read.prefix_digest == state.digest
    if not appended and read.start:  # rewritten: read it whole
        read = _read(path, 0, 0)
    what = "updated" if state is not None else "new"
    if appended and prefix > 0:  # (an empty file is detected again once it holds bytes)
        assert state is not None
        fmt, kind = state.format, str(resume.get("kind", "document"))
    else:
        role = _task_role(path)
        if role == "sidecar":
            fmt = None
        elif role == "api":
            fmt = cline.FORMAT
        else:
            try:
                fmt = registry.detect(path)
            except TranscriptFormatError as exc:
                if state is None:
                    raise _Skip("no known transcript format") from exc
                fmt = None  # an archived file no longer a transcript: keep archiving it
        kind = _kind(fmt, read.data)
    archive_from = prefix if appended else 0
    base = FileUpdate(
        path=path,
        format=fmt,
        device=read.info.st_dev,
        inode=read.info.st_ino,
        size=read.size,
        mtime_ns=read.info.st_mtime_ns,
        digest=read.digest,
        new_version=state is not None and not appended,
        chunks=_chunks(archive_from, read.data[archive_from - read.start :]),
        when=now,
        base=_NEW_FILE if state is None else (state.version, state.size, state.digest),
    )
    if fmt is None or kind == "archive":
        return what, replace(base, resume={"kind": "archive", "nodes": 0}, parsed=False), None
    if kind == "document" and read.start:
        read = _read(path, 0, 0)
    if kind == "document":
        try:
            result = _import(registry, fmt, path, read.data)
        except TranscriptFormatError as exc:
            failed = {"kind": kind, "error": str(exc), "nodes": 0}
            return what, replace(base, resume=failed, parsed=False), str(exc)
        positions = [p for n in result.nodes if (p := _position(n)) is not None]
        last = max(positions, default=None)
        tail = {n.hash for n in result.nodes if last is not None and _position(n) == last}
        if not tail and result.nodes:
            tail = {result.nodes[-1].hash}
        update = replace(
            base,
            nodes=result.nodes,
            provisional=frozenset(tail),
            resume={"kind": kind, "nodes": len(result.nodes)},
        )
        return what, update, None
    continued = state if appended else None
    update, error = _sync_lines(store, path, continued, fmt, kind, read, base, registry)
    return what, update, error


def _same(state: FileState, read: _Read, now: float) -> FileUpdate:
    return FileUpdate(
        path=state.path,
        format=state.format,
        device=read.info.st_dev,
        inode=read.info.st_ino,
        size=read.size,
        mtime_ns=read.info.st_mtime_ns,
        digest=read.digest,
        new_version=False,
        resume=state.resume,
        when=now,
        parsed=False,
        base=(state.version, state.size, state.digest),
    )


def _sync_lines(
    store: ArchiveStore,
    path: str,
    state: FileState | None,
    fmt: str,
    kind: str,
    read: _Read,
    base: FileUpdate,
    registry: _Registry,
) -> tuple[FileUpdate, str | None]:
    """A line-based format: parse from the cut on (module docstring). ``state`` is ``None``
    when the file is read from its start. Returns the update and the import error, if any."""
    resume: Mapping[str, Any] = state.resume if state is not None else {}
    cut = read.start
    cut_line = int(resume.get("cut_line", 0)) if cut else 0
    context = resume.get("context") if cut else None
    padding = b"\n" * cut_line
    if isinstance(context, list) and len(context) == 3 and 0 < context[0] <= cut_line:
        line, offset, length = (int(x) for x in context)
        with open_regular(path) as handle:
            handle.seek(offset)
            text = handle.read(length)
        padding = b"\n" * (line - 1) + text + b"\n" * (cut_line - line)
    known: Mapping[str, str | None] = {}
    if kind == "keyed" and state is not None and cut:
        known = store.sync_keys(state)
    attach = resume.get("attach") if kind == "chain" and cut else None
    root = attach if isinstance(attach, str) else None
    continuation = Continuation(known=known, root_parent=root)
    try:
        with continuing(continuation):
            result = _import(registry, fmt, path, padding + read.data)
    except TranscriptFormatError as exc:
        failed = {"kind": kind, "error": str(exc), "nodes": 0}
        return replace(base, resume=failed, parsed=False), str(exc)
    nodes = result.nodes
    carried = resume.get("model") if cut else None
    if fmt == aider.FORMAT and isinstance(carried, str):
        nodes = _carry_model(nodes, carried)
    tail_line = _tail_line(fmt, nodes)
    if tail_line is None or tail_line <= cut_line:
        new_cut, new_cut_line = cut, cut_line
    else:
        new_cut_line = tail_line - 1
        new_cut = cut + _line_start(read.data, new_cut_line - cut_line)
    tail = [n for n in nodes if (p := _position(n)) is None or p > new_cut_line]
    before = int(resume.get("before", 0)) if cut else 0
    new_resume: dict[str, Any] = {
        "kind": kind,
        "cut": new_cut,
        "cut_line": new_cut_line,
        "nodes": before + len(nodes),
        "before": before + len(nodes) - len(tail),
    }
    if kind == "chain":
        first = min(tail, key=lambda n: _position(n) or 0, default=None)
        if first is not None:
            new_resume["attach"] = first.parent_hash
        else:
            new_resume["attach"] = nodes[-1].hash if nodes else root
    if fmt == aider.FORMAT:
        model = _aider_model(read.data[: new_cut - cut], carried)
        if model is not None:
            new_resume["model"] = model
    found = _context_line(fmt, read.data, new_cut - cut, cut_line, cut)
    if found is not None:
        new_resume["context"] = found
    elif isinstance(context, list):
        new_resume["context"] = context
    update = replace(
        base,
        nodes=nodes,
        provisional=frozenset(n.hash for n in tail),
        keys=_keys(continuation.resolved, nodes) if kind == "keyed" else {},
        resume=new_resume,
    )
    return update, None


_AIDER_STATE: Final = re.compile(
    rb"^(?:" + re.escape(aider.SESSION_HEADER.encode()) + rb"|> (?:Main )?[Mm]odel: (\S+))",
    re.MULTILINE,
)


def _aider_model(data: bytes, model: Any) -> str | None:
    """The model of the Aider session open at the end of ``data`` (the first ``> Model:``
    line after the last session header, as the importer takes it), starting from ``model``."""
    current = model if isinstance(model, str) else None
    for match in _AIDER_STATE.finditer(data):
        if match.group(1) is None:
            current = None  # a new session
        elif current is None:
            current = match.group(1).decode("utf-8", "replace")
    return current


def _carry_model(nodes: Sequence[Node], model: str) -> tuple[Node, ...]:
    """Aider names its model once, at the start of a session: the assistant nodes of a part
    read after the cut get the model of the session they continue (up to the next
    session's first node). The model is not hashed: the ids stay."""
    out: list[Node] = []
    carrying = True
    for node in nodes:
        carrying = carrying and "started_at" not in node.metadata
        if carrying and node.bucket.role == "assistant" and node.bucket.model is None:
            node = Node(
                node.hash, node.parent_hash, replace(node.bucket, model=model), node.metadata
            )
        out.append(node)
    return tuple(out)


def _keys(resolved: Mapping[str, str | None], nodes: Sequence[Node]) -> dict[str, str | None]:
    """The keys later lines may name: every record's key, and every line merged into a node
    (Claude Code lists them in the node's ``uuids``; a child naming one attaches to the
    node)."""
    keys = dict(resolved)
    for node in nodes:
        uuids = node.metadata.get("uuids")
        if isinstance(uuids, list):
            for uuid in uuids:
                if isinstance(uuid, str):
                    keys.setdefault(uuid, node.hash)
    return keys


def _context_line(fmt: str, data: bytes, end: int, first_line: int, start: int) -> list[int] | None:
    """``[line, offset, length]`` of the last context line (``_CONTEXT_LINES``) in
    ``data[:end]`` (``data`` starts at file offset ``start``, line ``first_line + 1``)."""
    pattern = _CONTEXT_LINES.get(fmt)
    if pattern is None or end <= 0:
        return None
    found = None
    for match in pattern.finditer(data, 0, end):
        found = match.start()
    if found is None:
        return None
    begin = data.rfind(b"\n", 0, found) + 1
    stop = data.find(b"\n", found)
    stop = len(data) if stop < 0 else stop + 1
    if stop > end:
        return None
    line = first_line + data.count(b"\n", 0, begin) + 1
    return [line, start + begin, stop - begin]


# --- the run ----------------------------------------------------------------------------------


def sync_paths(
    paths: Iterable[str | os.PathLike[str]],
    store: ArchiveStore,
    importers: Mapping[str, Importer],
    detect: Callable[[str], str],
    *,
    progress: Callable[[str], None] | None = None,
) -> SyncReport:
    """Archive and import every transcript file under ``paths`` incrementally (module
    docstring).

    Args:
        paths: files and folders (folders are walked recursively).
        store: the node store (SQLite or PostgreSQL) that keeps the nodes and the archive.
        importers: the importers by format name (``transcripts.FORMATS``).
        detect: names the format of a file (``transcripts.detect_format``).
        progress: called with each path before it is looked at (for a progress line).

    Returns:
        A :class:`SyncReport`.

    Raises:
        NodeStoreError: the store cannot be read or written (what was committed before
            stays: every file is its own transaction).
    """
    registry = _Registry(importers, detect)
    states = store.file_states()
    tally = _Tally()
    batch = _Batch(store, tally)
    now = time.time()
    seen: set[str] = set()
    for path, info, skip in _walk(list(paths)):
        if path in seen or store.owns(path):
            continue  # the store's own files; a file named twice (overlapping paths) once
        seen.add(path)
        tally.files += 1
        if progress is not None:
            progress(path)
        if skip is not None or info is None:
            tally.skipped.append((path, skip or "cannot read"))
            continue
        state = states.get(path)
        try:
            if not stat.S_ISREG(info.st_mode):
                raise _Skip("not a regular file")
            if state is not None and (
                info.st_dev,
                info.st_ino,
                info.st_size,
                info.st_mtime_ns,
            ) == (state.device, state.inode, state.size, state.mtime_ns):
                continue  # unchanged: stat only
            what, update, error = _sync_one(store, path, state, registry, now)
        except _Skip as exc:
            tally.skipped.append((path, str(exc)))
            continue
        except OSError as exc:
            tally.skipped.append((path, f"cannot read: {exc.strerror or exc}"))
            continue
        batch.add(update, what, error)
    batch.flush()
    return SyncReport(
        files=tally.files,
        new_files=tally.new_files,
        updated_files=tally.updated_files,
        skipped=len(tally.skipped),
        new_nodes=tally.new_nodes,
        nodes=len(store),
        skipped_files=tuple(tally.skipped),
        failed=tuple(tally.failed),
    )


# --- forgetting -------------------------------------------------------------------------------

_WORD: Final = re.compile(r"[A-Za-z0-9]{6,}")


def _words(node: Node) -> list[bytes]:
    """ASCII letter-and-digit runs of 6+ characters of the node's text and thinking blocks:
    each appears verbatim in any file the node was read from (JSON escapes neither letters
    nor digits; Aider's Markdown is the text itself). Longest first."""
    found: set[str] = set()
    for block in node.bucket.content:
        for text in (block.text, block.thinking):
            if isinstance(text, str):
                found.update(_WORD.findall(text))
    return sorted((w.encode() for w in found), key=lambda w: (-len(w), w))


def archived_sources(
    store: ArchiveStore,
    node: Node,
    importers: Mapping[str, Importer],
    detect: Callable[[str], str],
) -> tuple[tuple[str, int], ...]:
    """The archived versions whose import gives ``node``: ``(path, 1-based version)``.

    Every kept version of every archived transcript is read back from the store and imported
    whole (as its format; a Cline history without its folder's ``ui_messages.json``, which
    only adds metadata); a version that cannot contain the node's text (one of its longest
    words is not in the bytes) is not imported. Versions whose import fails are not named.

    Raises:
        NodeStoreError: the store cannot be read, or archived bytes fail their check.
    """
    registry = _Registry(importers, detect)
    words = _words(node)[:1]
    found: list[tuple[str, int]] = []
    for path, fmt, version in store.archived_versions():
        if fmt is None or fmt not in importers:
            continue
        data = b"".join(store.archived_bytes(path, version))
        if any(word not in data for word in words):
            continue
        try:
            result = _import(registry, fmt, path, data)
        except TranscriptFormatError:
            continue
        if any(n.hash == node.hash for n in result.nodes):
            found.append((path, version))
    return tuple(found)
