"""Rules shared by every transcript importer (DESIGN section 3, "Importers").

An importer reads its source format into :class:`RawMessage` records (one per message, plus
link-only records for lines that are not messages but that children may name as parent) and
hands them to :func:`build_nodes`, which applies the rules that do not depend on the format:

- A message whose projected content is empty is not a node; its children attach to its nearest
  kept ancestor. A link-only record (``bucket=None``) is passed through the same way.
- A node's parent hash is the hash of its nearest kept ancestor (``None``: a root).
- Parents may come before or after their children in the input (forward references wait).
- A key that occurs more than once is handled without ever joining unrelated turns:
  records repeating a key with the same parent key and the same hashed content are one
  message (later copies are counted in ``duplicates`` and otherwise ignored); if the copies
  differ, the key is *ambiguous*: each record still becomes a node under its own parent, but
  a record naming an ambiguous key as parent starts a new root (counted in ``detached``, the
  key kept in its node's metadata as ``detached_from``).
- A record whose parent key is unknown, is its own key, or lies on a cycle of forward
  references also starts a new root (counted in ``detached``).
- Inside :func:`continuing` (``dag sync`` reading the part of a file appended since its last
  sync), a parent key of an earlier part attaches to the hash that part gave it, and the
  first record without a parent key may continue an earlier chain.

The helpers below turn common source shapes into :class:`~merkle_memory.dag.ContentBlock`.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import re
import stat
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, Final

from .._fork import renew_in_child
from .._json import depth_text, json_copy
from ..dag import Bucket, ContentBlock, Node, node_digest
from ..errors import DagError, TranscriptFormatError

__all__ = [
    "BuildResult",
    "Continuation",
    "ImportResult",
    "RawMessage",
    "build_nodes",
    "build_result",
    "continuing",
    "json_doubles",
    "load_json_file",
    "not_json",
    "open_regular",
    "paused_collector",
    "read_regular",
    "replace_lone_surrogates",
    "tool_arguments",
    "tool_result_block",
]

_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


class _Pauses:
    """The imports inside :func:`paused_collector` (the module's one ``_PAUSES``)."""

    __slots__ = ("__weakref__", "depths", "disabled", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depths: dict[int, int] = {}  # thread id -> its imports inside
        self.disabled = False  # whether they disabled the collector

    def _after_fork_in_child(self) -> None:
        """In a forked child (``_fork.renew_in_child``) only the forking thread runs: keep its
        own imports, forget the other threads' (and use a new lock, which one of them may
        have held); with none left, enable the collector again if the pause disabled it."""
        self.lock = threading.Lock()
        depth = self.depths.get(threading.get_ident(), 0)
        self.depths = {threading.get_ident(): depth} if depth else {}
        if not depth and self.disabled:
            self.disabled = False
            gc.enable()


_PAUSES: Final = _Pauses()
renew_in_child(_PAUSES)


@contextmanager
def paused_collector() -> Iterator[None]:
    """Pause Python's cyclic garbage collector (``gc``) for the duration of an import.

    An import allocates hundreds of thousands of long-lived containers (parsed lines, blocks,
    nodes) and frees almost none, so the collector's passes find nothing to free yet scan the
    growing heap again and again: about a tenth of a large import's time. Reference counting
    still frees every object that is not in a cycle. The collector is disabled on entry when
    it is enabled, and enabled again when the last of the imports running in this process
    (any thread) leaves; when it was already disabled, nothing is touched. A program that
    disables the collector itself from another thread while an import runs finds it enabled
    again when the import ends. A child forked during imports counts only the forking
    thread's own (the other threads do not exist there): with none, the child starts with
    the collector enabled again if the pause had disabled it.
    """
    pauses, ident = _PAUSES, threading.get_ident()
    with pauses.lock:
        if not pauses.depths:
            pauses.disabled = gc.isenabled()
            if pauses.disabled:
                gc.disable()
        pauses.depths[ident] = pauses.depths.get(ident, 0) + 1
    try:
        yield
    finally:
        with pauses.lock:  # read anew: a fork inside the import makes a new one
            depths = pauses.depths
            depth = depths.get(ident, 0) - 1
            if depth > 0:
                depths[ident] = depth
            else:
                depths.pop(ident, None)
            if not depths and pauses.disabled:
                pauses.disabled = False
                gc.enable()


@dataclass(frozen=True, slots=True)
class RawMessage:
    """One record of a source transcript, before hashing.

    Attributes:
        key: the record's id in its source (a Claude Code ``uuid``, an array index, ...).
            Keys are local to one import.
        parent_key: the key of the record it follows, or ``None`` for a root.
        bucket: the message, or ``None`` for a link-only record (a line that is not a message
            but that children may name as their parent).
        metadata: JSON object kept on the node, not hashed.
    """

    key: str
    parent_key: str | None
    bucket: Bucket | None
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BuildResult:
    """What :func:`build_nodes` produced.

    Attributes:
        nodes: distinct nodes (by hash), every parent before its children, otherwise in input
            order.
        dropped: messages not made nodes because their projected content is empty.
        duplicates: records that repeated an earlier record exactly (same key, parent key and
            hashed content) and were ignored.
        detached: records that started a new root because their parent key was unknown,
            ambiguous, their own key, or on a cycle.
    """

    nodes: tuple[Node, ...]
    dropped: int = 0
    duplicates: int = 0
    detached: int = 0


@dataclass(frozen=True, slots=True)
class ImportResult:
    """The nodes read from one transcript.

    Attributes:
        format: the format name, e.g. ``"claude-code"``.
        nodes: distinct nodes, every parent before its children (see :class:`BuildResult`).
        messages: message records read (lines or array items that hold a message).
        skipped: records that are not messages (for JSONL: lines of other types, and a torn
            last line).
        dropped: messages whose projected content is empty (not nodes).
        duplicates: exact repeats of an earlier record (ignored).
        detached: records that started a new root because their parent was unknown or
            ambiguous.
        path: the file read, as given, or ``None`` for an in-memory object.
        skip_reasons: why records were skipped, ``{reason: count}``, for the formats that
            say so (Gemini CLI: ``"info message"``, ``"$set patch"``, ...); empty otherwise.
        skipped_lines: ``(1-based line, why)`` of each skipped record of a line-based format
            (``len(skipped_lines) == skipped`` there; empty for a document format), e.g.
            ``(3, "type 'file-history-snapshot' is not a message")``.
    """

    format: str
    nodes: tuple[Node, ...]
    messages: int
    skipped: int
    dropped: int = 0
    duplicates: int = 0
    detached: int = 0
    path: str | None = None
    skip_reasons: Mapping[str, int] = field(default_factory=dict)
    skipped_lines: tuple[tuple[int, str], ...] = ()


_EMPTY_CONTENT: Final = b'{"content":[]'


@dataclass(slots=True)
class Continuation:
    """Where the records of a file's later part continue its earlier parts (``dag sync``).

    Attributes:
        known: key -> the hash that earlier parts gave it (what its children attach to;
            ``None`` for a key whose children start roots). A record whose parent key is not
            among this part's keys but is known attaches there instead of starting a root.
        root_parent: the hash the first record without a parent key attaches to (a chain
            format continuing its chain), or ``None`` (it is a root, as usual).
        resolved: filled by :func:`build_nodes`: every key of this part -> its hash.
    """

    known: Mapping[str, str | None] = field(default_factory=dict)
    root_parent: str | None = None
    resolved: dict[str, str | None] = field(default_factory=dict)


_CONTINUATION: ContextVar[Continuation | None] = ContextVar("continuation", default=None)


@contextmanager
def continuing(continuation: Continuation) -> Iterator[Continuation]:
    """Make every :func:`build_nodes` call inside the block continue ``continuation``."""
    token = _CONTINUATION.set(continuation)
    try:
        yield continuation
    finally:
        _CONTINUATION.reset(token)


def _content_bytes(message: RawMessage) -> bytes | None:
    """The canonical bytes of a record's hashed content, ``None`` for a link-only record."""
    return None if message.bucket is None else message.bucket.hashed_bytes()


def _signature(message: RawMessage) -> tuple[str | None, bytes | None]:
    """What makes two records with one key the same message: parent key and a SHA-256 of the
    hashed content (a digest, not the bytes: only the first record of a repeated key is
    remembered, and only by this)."""
    body = _content_bytes(message)
    return (message.parent_key, None if body is None else hashlib.sha256(body).digest())


def _node(
    digest: str,
    parent: str | None,
    bucket: Bucket,
    metadata: Mapping[str, Any],
    detached_from: str | None,
    owned: bool,
) -> Node:
    """The node of a record (its metadata checked by :class:`Node`, and copied unless
    ``owned``: then :meth:`Node.from_parsed` keeps it when its copy would equal it).

    Raises:
        TranscriptFormatError: metadata that is not a JSON object (the model's text).
    """
    if detached_from is not None:
        metadata = {**metadata, "detached_from": detached_from}
    try:
        if owned:
            return Node.from_parsed(digest, parent, bucket, metadata)
        return Node(digest, parent, bucket, metadata)
    except DagError as exc:
        raise TranscriptFormatError(str(exc)) from exc


def build_nodes(messages: Iterable[RawMessage], *, owned: bool = False) -> BuildResult:
    """Turn source records into DAG nodes with the common importer rules (module docstring).

    Memory: the records are held until each is placed and then released, so what stays is
    the nodes (which share the records' buckets); a repeated key keeps one 32-byte digest of
    its first record's content, not the content bytes.

    Args:
        messages: records in source order; read once (an iterator is consumed as it goes).
        owned: ``True`` when every record's ``metadata`` is a fresh object the caller gives
            up (it neither keeps nor changes it, nor shares it between records): the nodes
            then keep it, checked but not copied (:meth:`~merkle_memory.dag.Node.from_parsed`;
            the same nodes and errors either way).

    Returns:
        A :class:`BuildResult`; its nodes can be added to a
        :class:`~merkle_memory.dag.Forest` in order.

    Raises:
        TranscriptFormatError: a record that is not a :class:`RawMessage`, or metadata that
            is not a JSON object.
    """
    continuation = _CONTINUATION.get()
    known: Mapping[str, str | None] = {} if continuation is None else continuation.known
    root_parent = None if continuation is None else continuation.root_parent
    records: list[RawMessage | None] = []
    first: dict[str, int] = {}  # key -> index of its first record
    signatures: dict[str, tuple[str | None, bytes | None]] = {}  # repeated keys only
    ambiguous: set[str] = set()
    duplicates = 0
    for index, message in enumerate(messages):
        if type(message) is not RawMessage and not isinstance(message, RawMessage):
            raise TranscriptFormatError(f"not a RawMessage: {type(message).__name__}")
        records.append(message)
        key = message.key
        seen = first.get(key)
        if seen is None:
            first[key] = index
            continue
        if key in ambiguous:
            continue
        signature = signatures.get(key)
        if signature is None:
            earlier = records[seen]
            assert earlier is not None  # nothing is released before the second loop
            signature = signatures[key] = _signature(earlier)
        if signature == _signature(message):
            duplicates += 1
            records[index] = None  # an exact repeat: never placed
        else:
            ambiguous.add(key)
    signatures.clear()

    resolved: dict[str, str | None] = {}  # key -> hash children attach to (None: a root)
    waiting: dict[str, list[int]] = {}  # parent key -> indexes of records waiting for it
    nodes: dict[str, Node] = {}
    dropped = 0
    detached = 0

    def place(index: int, parent_hash: str | None, detached_from: str | None) -> str:
        """Make record ``index`` a node (or drop it), release it, and return its key."""
        nonlocal dropped
        message = records[index]
        assert message is not None  # each record is placed once
        records[index] = None
        attach = parent_hash
        bucket = message.bucket
        if bucket is not None:
            body = bucket.hashed_bytes()
            if body.startswith(_EMPTY_CONTENT):
                dropped += 1
            else:
                digest = node_digest(body, parent_hash)
                if digest not in nodes:
                    nodes[digest] = _node(
                        digest, parent_hash, bucket, message.metadata, detached_from, owned
                    )
                attach = digest
        if message.key not in ambiguous:
            resolved[message.key] = attach
        return message.key

    def place_with_waiters(index: int, parent_hash: str | None, detached_from: str | None) -> None:
        key = place(index, parent_hash, detached_from)
        if key not in waiting or key in ambiguous:
            return  # the common case: no record waits for this one
        stack = [(c, resolved[key], None) for c in reversed(waiting.pop(key))]
        while stack:
            i, p, d = stack.pop()
            key = place(i, p, d)
            if key in ambiguous:
                continue
            children = waiting.pop(key, [])
            stack.extend((c, resolved[key], None) for c in reversed(children))

    for index in range(len(records)):
        record = records[index]
        if record is None:  # skipped as an exact repeat
            continue
        parent = record.parent_key
        if parent is None:
            place_with_waiters(index, root_parent, None)
            root_parent = None  # only the first root continues an earlier chain
        elif parent not in first and parent in known:
            place_with_waiters(index, known[parent], None)
        elif parent in ambiguous or parent == record.key or parent not in first:
            detached += 1
            place_with_waiters(index, None, parent)
        elif parent in resolved:
            place_with_waiters(index, resolved[parent], None)
        else:
            waiting.setdefault(parent, []).append(index)

    # What still waits lies on a cycle of forward references: start roots, in input order.
    while waiting:
        leftovers = sorted(i for group in waiting.values() for i in group)
        index = leftovers[0]
        pending = records[index]
        assert pending is not None
        parent_key = pending.parent_key
        waiting[parent_key or ""].remove(index)
        waiting = {k: v for k, v in waiting.items() if v}
        detached += 1
        place_with_waiters(index, None, parent_key)

    if continuation is not None:
        continuation.resolved.update(resolved)
    return BuildResult(tuple(nodes.values()), dropped, duplicates, detached)


TORN_LAST_LINE: Final = "a torn last line (not JSON and no newline: still being written)"
"""Why a line-based importer skips an unterminated last line that does not parse."""


def build_result(
    format_name: str,
    raw: Iterable[RawMessage],
    messages: int,
    skipped: int = 0,
    path: str | None = None,
    skipped_lines: Sequence[tuple[int, str]] = (),
    *,
    owned: bool = False,
) -> ImportResult:
    """Run :func:`build_nodes` and wrap its result.

    Args:
        format_name: the format name for :attr:`ImportResult.format`.
        raw: the records.
        messages: source message records read.
        skipped: source records that are not messages.
        path: the file read, or ``None``.
        skipped_lines: ``(1-based line, why)`` of each skipped record (line-based formats).
        owned: as for :func:`build_nodes`.

    Raises:
        TranscriptFormatError: as :func:`build_nodes`.
    """
    built = build_nodes(raw, owned=owned)
    return ImportResult(
        format_name,
        built.nodes,
        messages,
        skipped,
        dropped=built.dropped,
        duplicates=built.duplicates,
        detached=built.detached,
        path=path,
        skipped_lines=tuple(skipped_lines),
    )


# --- helpers for importers -------------------------------------------------------------------


def replace_lone_surrogates(text: str) -> str:
    """Replace each lone UTF-16 surrogate (left by a JSON ``\\udXXX`` escape cut in half) with
    U+FFFD, as a UTF-8 decoder would. Other characters are unchanged."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def json_doubles(value: Any) -> Any:
    """A copy of a parsed JSON value in which every integer beyond +-(2**53 - 1) is the nearest
    float (tapes hashes JSON numbers as IEEE doubles, DESIGN section 3).

    Raises:
        TranscriptFormatError: a value with no JSON meaning, or an integer too large for a
            double.
    """
    return json_copy(value, "JSON value", TranscriptFormatError)


def tool_arguments(arguments: Any) -> dict[str, Any] | None:
    """Normalize tool-call arguments to a JSON object for ``ContentBlock.tool_input``.

    An object is kept (copied); ``None`` or ``""`` gives ``None``; a string holding a JSON
    object is parsed; anything else (other JSON text, text that is not JSON, a list, a number)
    is kept as ``{"arguments": "<raw text>"}`` (DESIGN section 3), non-strings written as JSON.

    Raises:
        TranscriptFormatError: a value with no JSON meaning, or an object nested deeper than
            ``MAX_VALUE_DEPTH`` (also an object text too deep for the parser, :func:`not_json`).
    """
    if arguments is None or arguments == "":
        return None
    if isinstance(arguments, Mapping):
        return json_doubles(arguments)  # type: ignore[no-any-return]
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
        except RecursionError as exc:  # deep: an object is refused, anything else is text
            if arguments.lstrip(" \t\r\n").startswith("{"):
                raise TranscriptFormatError(f"tool arguments: {not_json(exc)}") from None
            parsed = None
        if isinstance(parsed, dict):
            return json_doubles(parsed)  # type: ignore[no-any-return]
        return {"arguments": arguments}
    try:
        raw = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise TranscriptFormatError(f"tool arguments are not JSON: {exc}") from exc
    except RecursionError as exc:
        raise TranscriptFormatError(f"tool arguments: {not_json(exc)}") from None
    return {"arguments": raw}


_FROM_PARSED: Final = partial(ContentBlock.from_parsed, surrogate_free=True)


def tool_result_block(
    result_id: str,
    output: Any,
    *,
    is_error: bool = False,
    text_types: Sequence[str] = ("text", "input_text", "output_text"),
    owned: bool = False,
) -> ContentBlock:
    """A ``tool_result`` block for the answer to tool call ``result_id`` (DESIGN section 3).

    Args:
        result_id: the ``tool_use_id`` of the call answered (goes to ``tool_result_id``).
        output: the tool's content: a string (becomes ``tool_output``), a list of parts (the
            ``text`` of parts whose ``type`` is in ``text_types`` is joined with ``"\\n"`` into
            ``tool_output``; every other part is kept, in order, in ``content``), ``None``, or
            any other JSON value (kept in ``content``).
        is_error: whether the tool reported an error.
        text_types: part types whose ``text`` is text.
        owned: ``output`` is the caller's own fresh ``json.loads`` value holding no lone
            surrogate, given up to the block (:meth:`ContentBlock.from_parsed`): checked, not
            copied.

    Raises:
        TranscriptFormatError: a non-string id, or a value with no JSON meaning.
    """
    if not isinstance(result_id, str):
        raise TranscriptFormatError(f"tool result id must be a string: {result_id!r:.80}")
    text = ""
    other: Any = None
    if isinstance(output, str):
        text = output
    elif isinstance(output, list | tuple):
        texts: list[str] = []
        rest: list[Any] = []
        for part in output:
            if (
                isinstance(part, Mapping)
                and part.get("type") in text_types
                and isinstance(part.get("text"), str)
            ):
                texts.append(part["text"])
            else:
                rest.append(part)
        text = "\n".join(texts)
        other = rest or None
    elif output is not None:
        other = output
    make = _FROM_PARSED if owned else ContentBlock
    return make(
        "tool_result",
        tool_result_id=result_id,
        tool_output=text,
        is_error=bool(is_error),
        content=other,
    )


def not_json(
    error: UnicodeDecodeError | ValueError | RecursionError, what: str = "not JSON"
) -> str:
    """Why the stdlib ``json`` parser refused a text: ``"<what> (<error>)"``, or for a
    ``RecursionError`` (a text nested deeper than the parser's stack reaches, about 1,000
    levels) the one depth text of :data:`~merkle_memory._json.MAX_VALUE_DEPTH`: ``"JSON text:
    nested deeper than 508 levels (canonical.MAX_DEPTH - 4)"``."""
    if isinstance(error, RecursionError):
        return depth_text("JSON text")
    return f"{what} ({error})"


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """Open a transcript file for reading in binary mode, refusing anything but a regular
    file *before* reading: the file is opened with ``O_NONBLOCK`` (opening a FIFO for reading
    without it waits for a writer forever), checked with ``fstat``, and only then switched to
    blocking reads.

    Raises:
        TranscriptFormatError: the path is a FIFO, a socket or a device (``PATH: not a
            regular file (a FIFO)``; ``path`` set).
        OSError: it cannot be opened (missing, no permission; a folder:
            ``IsADirectoryError``).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(21, "Is a directory", os.fspath(path))
        if not stat.S_ISREG(mode):
            kind = _special_kind(mode)
            raise TranscriptFormatError(
                f"{os.fspath(path)}: not a regular file ({kind})", path=os.fspath(path)
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _special_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


def read_regular(path: str | os.PathLike[str]) -> bytes:
    """All bytes of a regular file (:func:`open_regular`'s checks; its exceptions)."""
    with open_regular(path) as handle:
        return handle.read()


def load_json_file(path: Path) -> Any:
    """Parse a whole JSON file, for single-document importers (request bodies, agent files).

    Raises:
        TranscriptFormatError: not a regular file (a FIFO, a device: :func:`open_regular`),
            not UTF-8, not JSON, or nested too deep for the parser (:func:`not_json`;
            ``path`` set; ``line``: the 1-based line of a syntax error).
        OSError: the file cannot be read.
    """
    data = read_regular(path)
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        line = exc.lineno if isinstance(exc, json.JSONDecodeError) else None
        raise TranscriptFormatError(f"{path}: {not_json(exc)}", path=str(path), line=line) from exc
