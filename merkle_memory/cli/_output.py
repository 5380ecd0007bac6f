"""Output helpers shared by every ``merkle-memory`` command (DESIGN section 7, issue 9 item 4).

Three streams of output, three rules:

- the *result* (an id, canonical bytes, a report, one ``--json`` document) goes to stdout and
  is never silenced;
- *errors* are one line ``error: ...`` on stderr (:func:`error`), never silenced either;
- *messages* (notices, warnings, counts) go to stderr through :func:`note` and *progress*
  through :class:`Progress`; ``-q``/``--quiet`` silences both, and progress is only drawn
  when stderr is a terminal.

:func:`add_quiet` adds ``-q/--quiet`` to a subcommand; :class:`CommandGroup` wraps an argparse
subparsers object so that every subcommand registered through it gets ``-q`` and
:class:`HelpFormatter` (descriptions wrapped, ``epilog`` examples keep their lines).
"""

from __future__ import annotations

import argparse
import errno
import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, Final, TextIO, TypeVar

from .._pg import is_url, redact
from .._progress import ProgressCallback
from ..errors import CheckpointError

__all__ = [
    "CommandGroup",
    "HelpFormatter",
    "Progress",
    "add_quiet",
    "describe_oserror",
    "display_name",
    "error",
    "hex_prefix",
    "is_quiet",
    "keys_from",
    "must_exist",
    "note",
    "one_line",
    "plural",
    "positive_int",
    "print_json",
    "rollback_way_out",
    "write_stdout",
]

_T = TypeVar("_T")

#: Seconds between two redraws of the progress line (at most 10 updates a second).
MIN_INTERVAL: Final = 0.1


class HelpFormatter(argparse.HelpFormatter):
    """Wrap one-paragraph descriptions to the terminal; keep text with line breaks as is.

    So a ``description`` written as one long string is filled, and an ``epilog`` of examples
    (one per line) keeps its lines.
    """

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def add_quiet(parser: argparse.ArgumentParser) -> None:
    """Add ``-q/--quiet`` to ``parser``.

    The default is ``argparse.SUPPRESS`` so that a subcommand's parser never overwrites a
    ``-q`` given before the subcommand name (the top-level parser holds the ``False``
    default).
    """
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        default=argparse.SUPPRESS,
        help="no messages or progress on stderr (results and error lines still appear)",
    )


class CommandGroup:
    """Wrap an argparse subparsers object: each ``add_parser`` gets ``-q`` and keeps epilogs.

    Every parser it creates uses :class:`HelpFormatter` (unless the caller gives another
    ``formatter_class``), so the examples in an ``epilog`` keep their lines, and has
    ``-q/--quiet`` (:func:`add_quiet`). A parser given ``help`` but no ``description`` gets
    the help text as its description.
    """

    def __init__(self, subparsers: Any) -> None:
        self._subparsers = subparsers

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """Create the subcommand ``name``; keyword arguments are those of argparse's."""
        kwargs.setdefault("formatter_class", HelpFormatter)
        if "description" not in kwargs and "help" in kwargs:
            help_text = str(kwargs["help"])
            kwargs["description"] = help_text[:1].upper() + help_text[1:] + "."
        parser: argparse.ArgumentParser = self._subparsers.add_parser(name, **kwargs)
        add_quiet(parser)
        # So that main() reports an unknown flag with this subcommand's usage.
        parser.set_defaults(command_parser=parser)
        return parser


def is_quiet(args: argparse.Namespace) -> bool:
    """True when ``-q/--quiet`` was given (before or after the subcommand name)."""
    return bool(getattr(args, "quiet", False))


def display_name(text: str) -> str:
    """A text line holding file names, for display: each byte of a name that is not UTF-8
    (Python holds byte 0xNN as the lone surrogate U+DCNN, ``os.fsdecode``) as the four
    characters ``\\xNN``, as the JSON output writes it (:func:`json_text`); any other
    lone surrogate as U+FFFD; then :func:`one_line`."""
    if _LONE_SURROGATE.search(text) is not None:
        text = _LONE_SURROGATE.sub(_name_safe, text)
    return one_line(text)


def _name_safe(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"


def one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped (``\\n``, ``\\x1b``).

    So an error message quoting a hostile file name or value stays one line and cannot drive
    the terminal.
    """
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ascii(ch)[1:-1] for ch in text)


_PLURALS: Final = {"leaf": "leaves", "branch point": "branch points", "entry": "entries"}


def plural(count: int, word: str) -> str:
    """``"1 root"``, ``"2 roots"``, ``"0 leaves"``: ``count`` and ``word`` in the right number."""
    return f"{count} {word if count == 1 else _PLURALS.get(word, word + 's')}"


def hex_prefix(text: str) -> str:
    """An argparse ``type``: a hash or a unique prefix of one, 4 to 64 hex digits (any case),
    returned in lowercase; anything else is a usage error (exit 2)."""
    lowered = text.lower()
    if not (4 <= len(lowered) <= 64 and all(c in "0123456789abcdef" for c in lowered)):
        raise argparse.ArgumentTypeError(f"not a hash or a hash prefix (4-64 hex digits): {text!r}")
    return lowered


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer >= 1; anything else is a usage error (exit 2)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, not {value}")
    return value


def _key_lines(path: str) -> list[str]:
    """The keys of a key file: its non-empty lines, stripped, ``#`` comment lines left out.

    Raises:
        CheckpointError: the file holds no key, or is not UTF-8 text.
        OSError: the file cannot be read.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CheckpointError(f"{path}: not a key file (not UTF-8 text)") from None
    keys = [line.strip() for line in text.splitlines()]
    keys = [k for k in keys if k and not k.startswith("#")]
    if not keys:
        raise CheckpointError(f"{path}: no key in the key file")
    return keys


def keys_from(path: str, parse: Callable[[str], _T], *, first: bool = False) -> list[_T]:
    """``parse`` of every key of the key file ``path`` (:func:`_key_lines`), or of its first
    key only with ``first``.

    Raises:
        CheckpointError: as :func:`_key_lines`, or a key that ``parse`` refuses (the message
            then names ``path``).
        OSError: the file cannot be read.
    """
    keys = _key_lines(path)
    try:
        return [parse(key) for key in (keys[:1] if first else keys)]
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from exc


def must_exist(path: str | os.PathLike[str]) -> None:
    """Raise ``FileNotFoundError`` (``error: PATH: does not exist``, exit 1) when nothing is at
    ``path`` (a dangling symbolic link counts as something: the command then says why it
    refuses it). A ``postgresql://`` URL is not a path: never checked here."""
    if isinstance(path, str) and is_url(path):
        return
    if not os.path.lexists(path):
        raise FileNotFoundError(errno.ENOENT, "does not exist", os.fspath(path))


def rollback_way_out(tenant: str) -> str:
    """How to accept a refused rollback of ``tenant`` on the record (a hint appended to an
    error): ``ledger recover TENANT --accept-rollback``, for a folder or a
    ``postgresql://...#name`` tenant alike (docs/FORMAT.md sections 4.6 and 12), its path or
    URL quoted for a shell (``shlex.quote``) and any database password replaced by ``***``.
    """
    return (
        "; if the loss is known and accepted: merkle-memory ledger recover "
        f"{shlex.quote(redact(tenant))} --accept-rollback"
    )


def describe_oserror(exc: OSError) -> str:
    """One line for a file-system error: ``PATH: does not exist`` for a missing path, else
    ``REASON: PATH`` (``REASON`` alone when the error names no path)."""
    if isinstance(exc, FileNotFoundError) and exc.filename is not None:
        return f"{os.fsdecode(exc.filename)}: does not exist"
    reason = exc.strerror or str(exc)
    return f"{reason}: {os.fsdecode(exc.filename)}" if exc.filename is not None else reason


def error(message: str) -> None:
    """Print ``error: MESSAGE`` as one line on stderr (never silenced by ``-q``), any
    database password in it replaced by ``***`` (:func:`merkle_memory._pg.redact`)."""
    print(f"error: {one_line(redact(message))}", file=sys.stderr)


def note(args: argparse.Namespace, message: str) -> None:
    """Print a human message (a notice, a warning, a count) on stderr unless ``-q``."""
    if not is_quiet(args):
        print(message, file=sys.stderr)


def write_stdout(data: bytes | str) -> None:
    """Write all of ``data`` to stdout and flush; a failing reader or disk raises.

    CPython's buffered writer returns a short count, without raising, when the pipe breaks or
    the disk fills during one large write, so a big result could be cut silently with exit
    0. Here the rest is written again, which raises (``BrokenPipeError``, ``OSError``) and
    reaches :func:`merkle_memory.cli.main`. Text is encoded as stdout would encode it; a
    stdout without a binary buffer (a test's ``StringIO``) gets the text as is.

    Raises:
        OSError: stdout cannot take the bytes (``BrokenPipeError`` for a closed pipe).
    """
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(data if isinstance(data, str) else data.decode("utf-8", "replace"))
        sys.stdout.flush()
        return
    if isinstance(data, str):
        encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
        errors = getattr(sys.stdout, "errors", None) or "strict"
        data = data.encode(encoding, errors)
    sys.stdout.flush()  # text printed before goes first
    view = memoryview(data)
    while view:
        written = buffer.write(view)
        if not written:
            raise OSError(errno.EIO, "stdout accepted no bytes")
        view = view[written:]
    buffer.flush()


_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def _json_safe(match: re.Match[str]) -> str:
    code = ord(match.group())
    if 0xDC80 <= code <= 0xDCFF:  # byte 0xNN of a name that is not UTF-8 (os.fsdecode)
        return f"\\\\x{code - 0xDC00:02x}"  # the JSON text of the 4 characters \xNN
    return "\ufffd"


def json_text(document: Any) -> str:
    """``document`` as the CLI's JSON text (2-space indent, newline at the end), always
    valid UTF-8 that strict readers accept (RFC 8259 and I-JSON: no lone surrogate).

    A string holding bytes that are not UTF-8 (a file name: Python decodes byte 0xNN of one
    as the lone surrogate U+DCNN) has each such byte written as the four characters ``\\xNN``
    (``"bad\\\\xff.jsonl"`` in the JSON text, the name ``bad\\xff.jsonl`` once parsed; a
    shell gives the file back as ``$'bad\\xff.jsonl'``). Any other lone surrogate (from
    JSON content holding one) becomes U+FFFD. Every other character is written as itself.
    """
    text = json.dumps(document, ensure_ascii=False, indent=2)
    if _LONE_SURROGATE.search(text) is not None:  # only inside string literals
        text = _LONE_SURROGATE.sub(_json_safe, text)
    return text + "\n"


def print_json(document: Any) -> None:
    """Write ``document`` to stdout as one JSON document (:func:`json_text`: 2-space indent,
    UTF-8, newline; bytes of a name that are not UTF-8 as ``\\xNN``)."""
    write_stdout(json_text(document))


def _is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (OSError, ValueError):
        return False


class Progress:
    """One ``\\r``-rewritten progress line on stderr, cleared when the work ends.

    Drawn only when enabled: by :meth:`for_args`, when stderr is a terminal and ``-q`` was
    not given. Redraws are rate-limited to one per ``interval`` seconds (the first one is
    immediate); the line is cut to the terminal width so it never wraps. Use it as a context
    manager; leaving the block (also by an exception) erases the line, so an ``error:`` line
    that follows starts at column 0. Writing the line never raises: progress is cosmetic.

    Example:
        >>> with Progress("dag import", total=3, enabled=False) as progress:
        ...     for name in ("a.jsonl", "b.jsonl", "c.jsonl"):
        ...         progress.show(name)
        ...         progress.advance()
        >>> progress.done
        3
    """

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        enabled: bool = True,
        stream: TextIO | None = None,
        interval: float = MIN_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Prepare the line ``LABEL: DONE/TOTAL (PCT%) DETAIL`` (``LABEL: DONE DETAIL``
        without a total, ``LABEL: DETAIL`` before the first unit: a status line for work that
        cannot be counted); ``stream`` defaults to ``sys.stderr`` at construction time."""
        self.label = label
        self.total = total
        self.done = 0
        self.detail = ""
        self.enabled = enabled
        self._stream = stream if stream is not None else sys.stderr
        self._interval = interval
        self._clock = clock
        self._last_draw: float | None = None
        self._width = 0  # characters of the line now on screen (0: nothing drawn)

    @classmethod
    def for_args(cls, args: argparse.Namespace, label: str, total: int | None = None) -> Progress:
        """A progress line enabled when stderr is a terminal and ``-q`` was not given."""
        enabled = not is_quiet(args) and _is_terminal(sys.stderr)
        return cls(label, total, enabled=enabled, interval=MIN_INTERVAL)

    def __enter__(self) -> Progress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.clear()

    def advance(self, n: int = 1, detail: str | None = None) -> None:
        """Count ``n`` more units of work done (and set the detail text); redraw if due."""
        self.done += n
        if detail is not None:
            self.detail = detail
        self._maybe_draw()

    def show(self, detail: str) -> None:
        """Name the item being worked on now (a file, a tenant); redraw if due."""
        self.detail = detail
        self._maybe_draw()

    def reporter(self, prefix: str = "") -> ProgressCallback:
        """A ``progress(phase, done, total)`` callback for a library job (``_progress``).

        Each call shows ``[PREFIX: ]PHASE PCT%`` (``PHASE DONE`` without a total) as the
        detail of this line, so a job inside a counted loop (a tenant of ``--all``) shows
        both the loop's count and how far the job is; redrawn at most every ``interval``.
        """

        def report(phase: str, done: int, total: int | None) -> None:
            where = f"{phase} {min(100 * done // total, 100)}%" if total else f"{phase} {done}"
            self.show(f"{prefix}: {where}" if prefix else where)

        return report

    def wrap(self, items: Iterable[_T]) -> Iterator[_T]:
        """Yield ``items`` unchanged, counting one unit of work for each."""
        for item in items:
            yield item
            self.advance()

    def clear(self) -> None:
        """Erase the line if one is drawn; the next update draws it again."""
        if self._width:
            self._write("\r" + " " * self._width + "\r")
            self._width = 0
            self._last_draw = None

    def text(self) -> str:
        """The line as it would be drawn now (without the ``\\r``), not yet cut to width."""
        parts = []
        if self.total is not None:
            percent = 100 * self.done // self.total if self.total > 0 else 100
            parts.append(f"{self.done}/{self.total} ({percent}%)")
        elif self.done:
            parts.append(str(self.done))
        if self.detail:
            parts.append(one_line(self.detail))
        return f"{self.label}: {' '.join(parts)}"

    def _maybe_draw(self) -> None:
        if not self.enabled:
            return
        now = self._clock()
        if self._last_draw is not None and now - self._last_draw < self._interval:
            return
        self._last_draw = now
        columns = shutil.get_terminal_size(fallback=(80, 24)).columns
        line = self.text()[: max(columns - 1, 10)]
        padding = " " * max(self._width - len(line), 0)
        self._write("\r" + line + padding)
        self._width = len(line)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):
            self.enabled = False
