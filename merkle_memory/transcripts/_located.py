"""Private: errors that say where a transcript is wrong (file, 1-based line, message index).

Every :class:`~merkle_memory.errors.TranscriptFormatError` that escapes
:func:`~merkle_memory.transcripts.import_file` names its file (``error.path``) and, for a
line-based format, the line (``error.line``); its text then starts ``FILE:LINE: `` or
``FILE: ``. The error it replaces is kept as ``__cause__``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ..errors import MerkleMemoryError, TranscriptFormatError

__all__ = ["in_file", "located", "not_format"]


def in_file(
    path: str | os.PathLike[str], error: BaseException, line: int | None = None
) -> TranscriptFormatError:
    """A :class:`TranscriptFormatError` saying ``FILE[:LINE]: <error>``, to raise ``from error``.

    Args:
        path: the file read, as given.
        error: the error found (its text follows the location).
        line: the 1-based line number, or ``None`` (then ``error.line`` if it has one).
    """
    if line is None and isinstance(error, TranscriptFormatError):
        line = error.line
    where = f"{path}:{line}" if line is not None else str(path)
    return TranscriptFormatError(f"{where}: {error}", path=str(path), line=line)


@contextmanager
def located(where: str) -> Iterator[None]:
    """Prefix ``where: `` (e.g. ``openai: messages[3]``) to a library error raised inside,
    unless its text already starts with it; the result is a ``TranscriptFormatError`` raised
    from the original.

    Raises:
        TranscriptFormatError: for any :class:`MerkleMemoryError` raised in the block.
    """
    try:
        yield
    except MerkleMemoryError as exc:
        text = str(exc)
        if isinstance(exc, TranscriptFormatError) and text.startswith(where):
            raise
        raise TranscriptFormatError(f"{where}: {text}") from exc


def not_format(label: str, problem: str, path: str | Path | None = None) -> TranscriptFormatError:
    """The refusal of a source whose shape is not the requested format's.

    Args:
        label: what the format reads, with its article: ``"a letta agent file"``.
        problem: why not, e.g. ``"no 'messages' list"``.
        path: the file, or ``None`` for an in-memory value.

    Returns:
        ``FILE is not <label> (<problem>)`` (``not <label> (...)`` without a file), with
        ``path`` set.
    """
    if path is None:
        return TranscriptFormatError(f"not {label} ({problem})")
    return TranscriptFormatError(f"{path} is not {label} ({problem})", path=str(path))
