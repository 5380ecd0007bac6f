"""Private: :class:`Importer`, the one registry record of a transcript format.

Every format module builds one ``IMPORTER`` and takes its ``read_file`` (and, for a format that
is one JSON document, ``read_object``) from it, so reading a file, checking a document's shape,
building the nodes and naming the file in an error are written once, here.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._progress import ProgressCallback
from ..errors import DagError, MerkleMemoryError, TranscriptFormatError
from ._common import ImportResult, RawMessage, build_result, load_json_file
from ._located import in_file, not_format

__all__ = ["Importer"]


@dataclass(frozen=True, slots=True)
class Importer:
    """A registered transcript format (see ``merkle_memory.transcripts.FORMATS``).

    A format is read in one of two ways: a line-based format (a JSONL session) gives
    ``read_path``, which streams the file itself; a single-document format (a request body,
    an agent file: a JSON object with a ``messages`` list) gives ``parse``, ``shape_problem``
    and ``label``, and :meth:`read_file` / :meth:`read_object` do the rest. A format read
    from files in its own way that also has a parsed-document form (a Gemini CLI session, a
    Cline history) gives both: ``read_path`` for files, ``parse`` for :meth:`read_object`.

    Attributes:
        name: the format name used by ``--format``, e.g. ``"claude-code"``.
        read_path: for a line-based format, reads a file into an :class:`ImportResult`,
            given the file and an optional progress callback (``merkle_memory._progress``,
            phase ``"reading"`` in bytes) (raises ``TranscriptFormatError`` for unusable
            content, ``OSError`` for an unreadable file); ``None`` for a single-document
            format.
        sniff: given the first bytes of a file (``SNIFF_BYTES``, then twice as many each
            time no format said yes, up to ``SNIFF_LIMIT``), says whether it looks like this
            format; must not raise. ``False`` on a head that does not decide yet (a line cut
            short, a cut document without signs) lets detection read on.
        parse: for a single-document format, turns a parsed document whose shape passed
            ``shape_problem`` into records for
            :func:`~merkle_memory.transcripts.build_nodes`, or into the whole
            :class:`ImportResult` for a format that counts its own records (raises
            ``TranscriptFormatError``); ``None`` for a format read from files only.
        shape_problem: for a single-document format, says why a parsed value is not a
            document of this format (``None`` when it is one); must not raise.
        label: what a document of this format is, with its article, for the refusal
            ``not <label> (<why>)``: ``"a letta agent file"``.
        sniff_object: says whether a parsed value looks like this format (format detection
            of :func:`~merkle_memory.transcripts.import_object`); must not raise.
    """

    name: str
    read_path: Callable[[Path, ProgressCallback | None], ImportResult] | None
    sniff: Callable[[bytes], bool]
    parse: Callable[[Any], Iterable[RawMessage] | ImportResult] | None = None
    shape_problem: Callable[[Any], str | None] | None = None
    label: str = ""
    sniff_object: Callable[[Any], bool] | None = None

    def __post_init__(self) -> None:
        if self.read_path is None and self.parse is None:
            raise TranscriptFormatError(f"importer {self.name!r} needs read_path or parse")

    @classmethod
    def for_document(
        cls,
        name: str,
        label: str,
        parse: Callable[[Any], Iterable[RawMessage]],
        shape_problem: Callable[[Any], str | None],
        sniff: Callable[[bytes], bool],
        sniff_object: Callable[[Any], bool],
    ) -> Importer:
        """The record of a single-document format (see the attributes)."""
        return cls(name, None, sniff, parse, shape_problem, label, sniff_object)

    @property
    def is_document(self) -> bool:
        """Whether the format is one JSON document (so :meth:`read_object` can read it)."""
        return self.parse is not None

    def read_file(
        self, path: str | os.PathLike[str], *, progress: ProgressCallback | None = None
    ) -> ImportResult:
        """Read one file of this format into nodes.

        Args:
            path: the file.
            progress: optional ``progress(phase, done, total)`` callback
                (``merkle_memory._progress``): phase ``"reading"``, in bytes of the file, for
                a line-based format (a document is parsed in one step: no calls).

        Returns:
            An :class:`ImportResult` with ``path`` set to ``str(Path(path))``.

        Raises:
            TranscriptFormatError: the content cannot be read as this format (not JSON, a
                shape that is not this format's: ``FILE is not <label> (...)``, or content the
                importer refuses). The error names the file: its text starts ``FILE: `` or,
                for a line-based format, ``FILE:LINE: `` (1-based line); ``error.path`` and
                ``error.line`` say the same, and the error found is kept as ``__cause__``.
            OSError: the file cannot be read (missing, a directory, no permission).
        """
        file = Path(path)
        try:
            if self.read_path is not None:
                return self.read_path(file, progress)
            return self._read_document(load_json_file(file), file)
        except MerkleMemoryError as exc:
            if isinstance(exc, TranscriptFormatError) and exc.path is not None:
                raise
            raise in_file(path, exc) from exc

    def read_object(self, value: Any) -> ImportResult:
        """Read an already parsed document of this format (a request body, an agent file).

        Raises:
            TranscriptFormatError: the format is read from files only, ``value`` is not a
                document of this format (``not <label> (...)``), or content the importer
                cannot read (a malformed block or node included, with its own text).
        """
        try:
            return self._read_document(value, None)
        except DagError as exc:  # a model error about a value the document holds
            raise TranscriptFormatError(str(exc)) from exc

    def _read_document(self, value: Any, path: Path | None) -> ImportResult:
        parse, shape_problem = self.parse, self.shape_problem
        if parse is None:
            raise TranscriptFormatError(f"format {self.name!r} is read from files only")
        problem = None if shape_problem is None else shape_problem(value)
        if problem is not None:
            raise not_format(self.label, problem, path)
        raw = parse(value)
        where = None if path is None else str(path)
        if isinstance(raw, ImportResult):  # a format that counts its own records
            return raw if where is None else dataclasses.replace(raw, path=where)
        return build_result(self.name, raw, messages=len(value["messages"]), path=where)
