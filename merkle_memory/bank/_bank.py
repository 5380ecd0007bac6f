"""The memory bank: content-addressed memory files, active and archived (DESIGN section 5).

Layout of a bank folder ``BANK``::

    BANK/memories/<YYYYmmdd_HHMMSS>_<type>_<id>.json   active memories (L1)
    BANK/memories/archive/<same name>                   archived memories (L0)
    BANK/memories/.migrated.json                        migration index (after a migrate)
    BANK/ledger.jsonl, BANK/ledger.head                 the hash chain sealing every save
    BANK/bank.lock                                      cross-process lock of writers
    BANK/testimony.json                                 {"testimony": "salted"} (a salted bank)
    BANK/forgotten/<id>.json                            tombstones of forgotten memories

A folder is a bank when it holds ``memories/`` or ``ledger.jsonl``; only a save creates one
(the bank folder itself, never its missing parents). No folder or root file inside the bank is
ever followed through a symlink. A memory's status is the folder its file is in, never a
field. Files are written atomically (temp file in the same folder, fsync, ``os.replace``,
fsync of the folder) and read-only (0o444), and never rewritten: archiving is an
``os.replace`` into ``archive/``. Every save is sealed in the ledger with ``memory_id =
content_sha256 = id`` after its file is durable; a memory left unsealed by a crash is sealed by
the next save of it or by :meth:`MemoryBank.seal` (both through the ledger's adopt algorithm,
:func:`merkle_memory.ledger.seal_if_unsealed` and :func:`merkle_memory.ledger.seal_unsealed`).

Quick start::

    bank = MemoryBank("agent-bank")
    mid = bank.save(Memory("fact", "project", "Project uses FastAPI"))
    bank.get(mid).content            # 'Project uses FastAPI'
    bank.verify().ok                 # True
    bank.seal().sealed_ids           # () (adopts memory files with no ledger entry)
    bank.forget(mid, "user asked")   # file removed, tombstone sealed (op: forget)

A *salted* bank (``MemoryBank(root, salted=True)``, recorded in ``BANK/testimony.json`` by its
first save) gives every memory it saves a random salt kept in its file, so its id, which the
ledger holds, cannot be linked to guessed content once the file is forgotten.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import re
import stat
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from .. import canonical
from .._fsio import (
    atomic_write,
    create_tree_atomic,
    exclusive_lock,
    fsync_dir,
    makedirs_durable,
)
from .._progress import EVERY, ProgressCallback
from ..errors import (
    BankError,
    CanonicalizationError,
    LedgerError,
    MemoryFormatError,
    MemoryNotFoundError,
    TamperedMemoryError,
)
from ..ledger import (
    ForgetReceipt,
    Holdings,
    Ledger,
    SealReport,
    seal_if_unsealed,
    seal_unsealed,
    verify_ledger,
)
from ..ledger.settings import SETTINGS_NAME, read_testimony_mode, write_testimony_mode
from ..ledger.tombstones import (
    FORGOTTEN_DIR,
    check_reason,
    forget_record,
    latest_entry,
    scan_pending_tombstones,
    settle_forgets,
    tombstone_path,
)
from ._files import (
    LEGACY,
    NOT_A_MEMORY,
    REAPPEARED,
    UNEXPECTED_FILE,
    Inspection,
    id_from_name,
    inspect_file,
    is_temp_name,
    read_regular,
    real_dir,
    refuse_symlink,
    special_file,
)
from ._legacy import YAML_SUFFIXES, Legacy, NotLegacy, legacy_id_of, read_legacy, yaml_module
from ._migrate import (
    INDEX_NAME,
    ReportBuilder,
    check_index,
    dependency_order,
    index_bytes,
    merged_index,
    parse_index,
    replacement,
    unique_ids,
)
from ._okf import OKF_SUFFIX, TUR_FOLDERS, read_okf
from ._report import (
    AddResult,
    BankProblem,
    BankReport,
    MigratedFile,
    MigrationIssue,
    MigrationReport,
    StoredMemory,
    Tally,
)
from .memory import MAX_MEMORY_FILE_BYTES, MEMORY_URI_PREFIX, Memory, is_memory_id, memory_uri

__all__ = ["MemoryBank"]

_log = logging.getLogger("merkle_memory.bank")

_ROOT_FILES: Final = ("bank.lock", "ledger.jsonl", "ledger.head", "ledger.torn", SETTINGS_NAME)
_LEDGER_READS: Final = ("ledger.jsonl", "ledger.head")
"""Root files ``verify_ledger`` reads: when one is not a regular file the ledger is not read."""
_LAYOUT: Final = ("memories", "memories/archive")


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _check_file_size(data: bytes) -> bytes:
    """Return ``data`` (a memory file) when the bank can read it back, else MemoryFormatError."""
    if len(data) > MAX_MEMORY_FILE_BYTES:
        raise MemoryFormatError(
            f"memory file would be {len(data)} bytes, over the limit of "
            f"{MAX_MEMORY_FILE_BYTES} bytes (MAX_MEMORY_FILE_BYTES, 16 MiB)"
        )
    return data


def _check_id(memory_id: object) -> str:
    """``memory_id`` as an exact ``str`` (a subclass is read as its value, as every file and
    line of the bank holds it).

    Raises:
        BankError: it is not 64 lowercase hex characters.
    """
    if not is_memory_id(memory_id):
        raise BankError(f"not a memory id (64 lowercase hex): {str(memory_id)[:80]!r}")
    assert isinstance(memory_id, str)
    return str.__str__(memory_id)


_PREFIX: Final = re.compile(r"[0-9a-f]{4,64}")
_NAME_TYPE: Final = slice(16, -70)
"""``<YYYYmmdd_HHMMSS>_`` is 16 characters, ``_<64 hex>.json`` 70: the type between them."""


def _legacy_problem(name: str, found: Inspection) -> tuple[str, str] | None:
    """``(LEGACY, reason)`` when a file that does not verify is a legacy memory file (one that
    ``migrate`` rewrites), else ``None``."""
    if found.kind == NOT_A_MEMORY and found.data:
        try:
            legacy_id = legacy_id_of(canonical.loads(found.data))
        except CanonicalizationError:
            return None
        if legacy_id is not None:
            return LEGACY, (
                f"a legacy memory file (legacy id {legacy_id[:80]!r}), not content-addressed "
                "yet: migrate it (`merkle-memory bank migrate`, MemoryBank.migrate)"
            )
    regular = found.reason == "not a memory file name (*.json)"  # not a link nor a folder
    if found.kind == UNEXPECTED_FILE and regular and name.endswith(YAML_SUFFIXES):
        return LEGACY, (
            "a YAML memory file (a legacy format): migrate it (`merkle-memory bank "
            "migrate`, which needs the yaml extra: pip install 'merkle_memory[yaml]')"
        )
    return None


def _common(values: Iterable[str], what: str) -> str:
    """The one value all originals of a consolidation share, else BankError."""
    found = sorted(set(values))
    if len(found) != 1:
        shown = ", ".join(repr(v)[:40] for v in found[:5])
        raise BankError(f"the memories differ in {what} ({shown}); pass {what} explicitly")
    return found[0]


class MemoryBank:
    """A folder of content-addressed memory files (DESIGN section 5, EP-0106).

    A folder is a bank when it holds ``memories/`` or ``ledger.jsonl``. Creating the object
    touches nothing. Only :meth:`save` creates a bank: the bank folder itself (never its
    missing parents), ``memories/`` and ``memories/archive/``, built under a temp name and
    renamed into place, so a crash leaves no bank or a complete one. Every other operation on a
    folder that is not a bank raises ``BankError("no memory bank at ROOT")`` and creates
    nothing; reads never write. Writers (save, archive, consolidate, migrate, seal) hold an
    exclusive ``flock`` on ``BANK/bank.lock`` (created by the first writer); readers hold a
    shared one when the lock file exists (verify only while it scans the files, after its
    ledger snapshot).

    Args:
        root: the bank folder, a ``str`` or ``os.PathLike`` (it may itself be a symlink;
            nothing inside it is followed).
        salted: ``True``: make the bank salted (recorded in ``BANK/testimony.json`` by the
            next save); ``None`` (the default): keep the bank's recorded mode; ``False``:
            refuse, at the next save, a bank that is salted (a salted bank stays salted).

    Raises:
        BankError: ``root`` is neither a ``str`` nor an ``os.PathLike`` (e.g. ``None``), or
            ``salted`` is not a ``bool`` or ``None``.

    Attributes:
        root: the bank folder.
        active_dir: ``root/memories`` (active memories, L1).
        archive_dir: ``root/memories/archive`` (archived memories, L0).
        ledger_path: ``root/ledger.jsonl``.
    """

    def __init__(self, root: str | os.PathLike[str], *, salted: bool | None = None) -> None:
        if not isinstance(root, str | os.PathLike):
            raise BankError(f"bank root must be a str or os.PathLike, not {type(root).__name__}")
        if salted is not None and type(salted) is not bool:
            raise BankError(f"salted is True, False or None, not {salted!r:.40}")
        self.requested_salted = salted
        self.root = Path(root)
        self.active_dir = self.root / "memories"
        self.archive_dir = self.active_dir / "archive"
        self.ledger_path = self.root / "ledger.jsonl"

    def __repr__(self) -> str:
        return f"MemoryBank({str(self.root)!r})"

    # --- folders and locks -----------------------------------------------------------------

    def _check_layout(self) -> bool:
        """True when the bank's folders exist; BankError on a symlinked or non-folder part, or
        a root file (``bank.lock``, ``ledger.*``) that is a symlink or not a regular file."""
        if not self.root.is_dir():
            return False
        for name in _ROOT_FILES:
            refuse_symlink(self.root / name, name)
            if special_file(self.root / name) is not None:
                raise BankError(f"{name} is not a regular file (never opened)")
        real_dir(self.root / FORGOTTEN_DIR, "forgotten/")  # tombstones: never followed
        return real_dir(self.active_dir, "memories/") and real_dir(
            self.archive_dir, "memories/archive/"
        )

    def _is_bank(self) -> bool:
        """True when ``root`` is a folder holding ``memories/`` or ``ledger.jsonl``."""
        return self.root.is_dir() and (
            os.path.lexists(self.active_dir) or os.path.lexists(self.ledger_path)
        )

    def _require_root(self) -> None:
        """Raise ``BankError("no memory bank at ROOT")`` unless :meth:`_is_bank` holds."""
        if not self._is_bank():
            raise BankError(f"no memory bank at {self.root}")

    def _create_root(self) -> None:
        """Create the bank atomically when the bank folder is missing (never its parents).

        The folder is built with ``memories/`` and ``memories/archive/`` under a temp name
        beside it, fsynced and renamed into place (:func:`create_tree_atomic`), so a crash
        leaves no bank or a complete empty one, never a folder that is not a bank. An
        existing folder is completed under the bank lock (:meth:`_complete_layout`).

        Raises:
            BankError: the parent folder does not exist, the bank path is not a folder, or
                the folders cannot be created.
            OSError: fsync of a folder failed.
        """
        if self.root.is_dir():
            return
        if not os.path.lexists(self.root):
            try:
                create_tree_atomic(self.root, _LAYOUT)
            except FileNotFoundError as exc:
                raise BankError(
                    f"cannot create the bank {self.root}: the folder {self.root.parent} does "
                    "not exist (create it first)"
                ) from exc
            except OSError as exc:
                raise BankError(f"cannot create the bank {self.root}: {_why(exc)}") from exc
        if not self.root.is_dir():
            raise BankError(f"no memory bank at {self.root} (not a folder)")

    def _complete_layout(self) -> None:
        """Create ``memories/`` (atomically, with ``archive/`` in it) or ``archive/`` when
        missing from an existing bank folder. The caller holds the exclusive bank lock."""
        self._check_layout()
        if not real_dir(self.active_dir, "memories/"):
            create_tree_atomic(self.active_dir, ("archive",))
        self._ensure_dir(self.archive_dir)

    def _ensure_dir(self, folder: Path) -> None:
        """Create ``folder`` inside an existing bank (durably) and recheck the layout."""
        self._check_layout()
        makedirs_durable(folder)
        self._check_layout()

    @contextlib.contextmanager
    def _write_lock(self, *, create: bool = False) -> Iterator[None]:
        """Hold the exclusive bank lock (``bank.lock`` is created if missing).

        Args:
            create: create the bank (``save``); otherwise the folder must already be a bank
                (:meth:`_require_root`) and nothing but ``bank.lock`` is created here.
        """
        if not create:
            self._require_root()
        try:
            if create:
                self._create_root()
            self._check_layout()
            with exclusive_lock(self.root / "bank.lock"):
                if create:
                    self._complete_layout()
                yield
        except OSError as exc:
            raise BankError(f"cannot write to the bank {self.root}: {_why(exc)}") from exc

    @contextlib.contextmanager
    def _read_lock(self) -> Iterator[None]:
        """Hold a shared lock when a writer ever ran here (no file is created). A ``bank.lock``
        that is not a regular file is opened without blocking and not locked (``verify``
        reports it)."""
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(self.root / "bank.lock", flags)
        except OSError:
            yield
            return
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    def _ledger(self) -> Ledger:
        """The bank's ledger; BankError when ``ledger.jsonl`` is a symlink."""
        refuse_symlink(self.ledger_path, "ledger.jsonl")
        return Ledger(self.ledger_path)

    # --- salted ids ------------------------------------------------------------------------

    @property
    def salted(self) -> bool:
        """Whether the bank is salted (``BANK/testimony.json`` records ``"salted"``).

        Raises:
            BankError: ``testimony.json`` is malformed, not a regular file, or names a mode a
                bank does not use (``mnemo``: a bank's testimony is its ids).
        """
        return self._recorded_mode() == "salted"

    def _recorded_mode(self) -> str | None:
        try:
            mode = read_testimony_mode(self.root)
        except (LedgerError, NotADirectoryError) as exc:
            raise BankError(f"cannot read the bank's {SETTINGS_NAME}: {exc}") from exc
        if mode == "mnemo":
            raise BankError(f"{SETTINGS_NAME} names mode 'mnemo', which a memory bank does not use")
        return mode

    def _salt_saves(self) -> bool:
        """Under the write lock: whether saves salt, recording ``salted`` first when asked.

        Raises:
            BankError: ``salted=False`` was asked of a salted bank.
        """
        recorded = self._recorded_mode()
        wanted = self.requested_salted
        if wanted is None:
            return recorded == "salted"
        if not wanted:
            if recorded == "salted":
                raise BankError("the bank is salted (testimony.json); it stays salted")
            return False
        if recorded != "salted":
            write_testimony_mode(self.root, "salted")
        return True

    def _same_content(self, memory: Memory) -> Memory | None:
        """A memory of the bank (active or archived) with ``memory``'s seven core fields, found
        among the files named with its timestamp and type (a salted save of content the bank
        already holds finds it rather than writing a second file)."""
        prefix = memory.file_name.rsplit("_", 1)[0] + "_"
        for folder in (self.active_dir, self.archive_dir):
            for name in self._names(folder):
                if name.startswith(prefix) and not is_temp_name(name):
                    found = inspect_file(folder / name).memory
                    if found is not None and found.same_content(memory):
                        return found
        return None

    def _salted_for_saving(self, memory: Memory) -> Memory:
        """Under the write lock: the memory a save writes. In a salted bank an unsalted memory
        becomes the memory of the same content already in the bank, or a salted copy."""
        if memory.salt is not None or not self._salt_saves():
            return memory
        found = self._same_content(memory)
        return found if found is not None else memory.salted()

    # --- finding files ---------------------------------------------------------------------

    def _names(self, folder: Path) -> list[str]:
        """The sorted names in ``folder`` (none when it does not exist)."""
        try:
            return sorted(entry.name for entry in os.scandir(folder))
        except FileNotFoundError:
            return []

    def _find(self, memory_id: str) -> tuple[Path, bool] | None:
        """The file named for ``memory_id`` (active first) and whether it is archived."""
        if not self.root.is_dir():
            return None
        self._check_layout()  # refuses a symlinked folder; a missing one is searched as empty
        suffix = f"_{memory_id}.json"
        for folder, archived in ((self.active_dir, False), (self.archive_dir, True)):
            for name in self._names(folder):
                if name.endswith(suffix) and id_from_name(name) == memory_id:
                    return folder / name, archived
        return None

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _load(self, path: Path) -> Memory:
        found = inspect_file(path)
        if found.memory is None:
            raise TamperedMemoryError(f"{self._rel(path)}: {found.reason}", self._rel(path))
        return found.memory

    def _load_id(self, memory_id: str) -> tuple[Path, bool, Memory]:
        """Find and verify the memory ``memory_id``: its file, whether archived, the memory.

        Raises:
            MemoryNotFoundError: no file carries that id.
            TamperedMemoryError: the file does not verify, or the memory was forgotten and
                its file reappeared.
        """
        found = self._find(memory_id)
        if found is None:
            raise self._not_found(memory_id)
        path, archived = found
        if self._reappeared({memory_id}):
            rel = self._rel(path)
            raise TamperedMemoryError(f"{rel}: {_reappeared_reason(memory_id)}", rel)
        return path, archived, self._load(path)

    def _reappeared(self, memory_ids: Iterable[str]) -> set[str]:
        """The ids among ``memory_ids`` that have a tombstone and whose latest ledger entry
        is a ``forget``: a file carrying one is a forgotten memory put back. Reads the ledger
        only for ids with a tombstone file (``latest_entry``: about one read of it per id)."""
        folder = self.root / FORGOTTEN_DIR
        try:
            with os.scandir(folder) as listing:
                tombs = {e.name[:-5] for e in listing if e.name.endswith(".json")}
        except (FileNotFoundError, NotADirectoryError):
            return set()
        candidates = tombs.intersection(memory_ids)
        if not candidates:
            return set()
        ledger = self._ledger()
        out = set()
        for memory_id in candidates:
            latest = latest_entry(ledger, memory_id)
            if latest is not None and latest.op == "forget":
                out.add(memory_id)
        return out

    def _not_found(self, memory_id: str) -> MemoryNotFoundError:
        """The error for an id no file carries, saying so when the memory was forgotten."""
        if os.path.lexists(tombstone_path(self.root, memory_id)):
            return MemoryNotFoundError(
                f"memory {memory_id} was forgotten (forgotten/{memory_id}.json)", memory_id
            )
        return MemoryNotFoundError(f"no memory {memory_id} in {self.root}", memory_id)

    def _require_all(self, memory_ids: Iterable[str]) -> None:
        """MemoryNotFoundError for the first id no file carries (before a lock is taken, so
        that a failing writer creates no ``bank.lock``)."""
        for memory_id in memory_ids:
            if self._find(memory_id) is None:
                raise self._not_found(memory_id)

    # --- reading ---------------------------------------------------------------------------

    def locate(self, memory_id: str) -> StoredMemory:
        """Find and verify the memory ``memory_id``, active or archived.

        Args:
            memory_id: 64-char lowercase hex.

        Raises:
            BankError: ``memory_id`` is not 64-char lowercase hex, the folder is not a bank,
                or the bank's layout is unsafe (a symlinked folder).
            MemoryNotFoundError: no file carries that id.
            TamperedMemoryError: the file does not verify (content, id and name disagree),
                or the memory was forgotten and its file reappeared (its ledger's latest
                entry is a ``forget``).
        """
        memory_id = _check_id(memory_id)
        self._require_root()
        with self._read_lock():
            path, archived, memory = self._load_id(memory_id)
            return StoredMemory(memory, archived, self._rel(path))

    def get(self, memory_id: str) -> Memory:
        """The memory ``memory_id`` (active or archived), verified. Raises as :meth:`locate`
        (``TamperedMemoryError`` for a forgotten memory whose file reappeared)."""
        return self.locate(memory_id).memory

    def __contains__(self, memory_id: object) -> bool:
        """True when a file named for ``memory_id`` exists (active or archived); not verified."""
        return is_memory_id(memory_id) and self._find(str(memory_id)) is not None

    def resolve(self, prefix: str) -> str:
        """The full id of the one memory (active or archived) whose id starts with ``prefix``.

        What ``bank archive`` and ``bank consolidate`` accept for an ``ID``, as ``dag show``
        accepts a hash prefix. Reads file names only (nothing is verified or written).

        Args:
            prefix: 4 to 64 lowercase hex characters (a whole id resolves to itself when a
                file carries it).

        Raises:
            BankError: ``prefix`` is not 4-64 lowercase hex; the folder is not a bank; more
                than one memory's id starts with it (``ambiguous``).
            MemoryNotFoundError: no memory file's id starts with it.
        """
        if not isinstance(prefix, str) or _PREFIX.fullmatch(prefix) is None:
            raise BankError(
                f"not a memory id or id prefix (4-64 lowercase hex): {str(prefix)[:80]!r}"
            )
        self._require_root()
        self._check_layout()
        found = sorted(
            {
                memory_id
                for folder in (self.active_dir, self.archive_dir)
                for name in self._names(folder)
                if (memory_id := id_from_name(name)) is not None and memory_id.startswith(prefix)
            }
        )
        if len(found) > 1:
            raise BankError(f"memory id prefix {prefix} is ambiguous ({len(found)} memories)")
        if not found:
            raise MemoryNotFoundError(f"no memory {prefix} in {self.root}", prefix)
        return found[0]

    def memories(
        self, *, archived: bool | None = False, problems: list[BankProblem] | None = None
    ) -> list[StoredMemory]:
        """List the memories that verify, sorted by (timestamp, id).

        Args:
            archived: ``False`` for active memories, ``True`` for archived ones, ``None`` for
                both.
            problems: when given, every file of either folder that does not verify is
                appended to it (:meth:`verify` gives the full report, including the ledger),
                and every file of a forgotten memory that reappeared (kind ``reappeared``;
                such a memory is never listed).

        Raises:
            BankError: the folder is not a bank (``no memory bank at ROOT``), or a folder
                inside it is a symlink.
        """
        self._require_root()
        with self._read_lock():
            items = [
                item for item in self._scan(problems) if archived is None or item[1] == archived
            ]
            back = self._reappeared(memory.id for memory, _, _ in items)
        if back:
            for memory, _, rel in items:
                if memory.id in back and problems is not None:
                    problems.append(BankProblem(rel, REAPPEARED, _reappeared_reason(memory.id)))
            items = [item for item in items if item[0].id not in back]
        stored = [StoredMemory(memory, arch, rel) for memory, arch, rel in items]
        return sorted(stored, key=lambda s: (s.memory.timestamp, s.memory.id))

    def _scan(
        self,
        problems: list[BankProblem] | None,
        *,
        warn: bool = True,
        progress: ProgressCallback | None = None,
    ) -> Iterator[tuple[Memory, bool, str]]:
        """Yield ``(memory, archived, relative path)`` for each file that verifies, active
        first, by name; append a :class:`BankProblem` to ``problems`` (when given) for every
        other file. The caller holds a bank lock, shared or exclusive.

        Temp files of interrupted writes are skipped (``verify`` lists them as leftovers; with
        ``warn``, each is also logged as a warning on the ``merkle_memory.bank`` logger). The
        migration index ``memories/.migrated.json`` is not a memory: it is skipped, and
        reported only when it does not parse as an index. A file that does not verify but is a
        legacy memory (one ``migrate`` rewrites) is a ``legacy`` problem. ``progress``
        (``merkle_memory._progress``): phase ``"files"``, in directory entries examined.
        """
        out = problems if problems is not None else []
        total = done = 0
        if progress is not None:
            total = len(self._names(self.active_dir)) + len(self._names(self.archive_dir))
        for folder, archived in ((self.active_dir, False), (self.archive_dir, True)):
            rel_folder = self._rel(folder)
            try:
                if not real_dir(folder, rel_folder + "/"):
                    continue
            except BankError as exc:
                out.append(BankProblem(rel_folder, UNEXPECTED_FILE, str(exc)))
                if not archived:
                    return
                continue
            base = os.fspath(folder)
            for name in self._names(folder):
                done += 1
                if progress is not None and done % EVERY == 0:
                    progress("files", min(done, total), total)
                path = os.path.join(base, name)
                rel = f"{rel_folder}/{name}"
                if not archived and name == "archive":
                    continue
                if not archived and name == INDEX_NAME:
                    if (bad := check_index(path)) is not None:
                        out.append(BankProblem(rel, *bad))
                    continue
                if is_temp_name(name):
                    if warn:
                        _log.warning("%s: temp file left by an interrupted write", rel)
                    continue
                found = inspect_file(path)
                if found.memory is None:
                    assert found.kind is not None and found.reason is not None
                    kind, reason = _legacy_problem(name, found) or (found.kind, found.reason)
                    out.append(BankProblem(rel, kind, reason))
                    continue
                yield found.memory, archived, rel
        if progress is not None:
            progress("files", total, total)

    def _tally(self, progress: ProgressCallback | None = None) -> Tally:
        """Scan both folders (the caller holds a bank lock, shared or exclusive)."""
        leftovers = [
            self._rel(folder / name)
            for folder in (self.active_dir, self.archive_dir)
            for name in self._names(folder)
            if is_temp_name(name)
        ]
        problems: list[BankProblem] = []
        valid: list[str] = []
        links: list[tuple[str, str, str]] = []
        counts = {False: 0, True: 0}
        for memory, is_archived, rel in self._scan(problems, warn=False, progress=progress):
            valid.append(memory.id)
            counts[is_archived] += 1
            for link in memory.links:
                target = link[len(MEMORY_URI_PREFIX) :].partition("#")[0]
                if link.startswith(MEMORY_URI_PREFIX) and is_memory_id(target):
                    links.append((rel, link, target))
        return Tally(
            tuple(valid),
            counts[False],
            counts[True],
            tuple(problems),
            tuple(leftovers),
            tuple(links),
        )

    def _tally_shared(self, progress: ProgressCallback | None = None) -> Tally:
        """:meth:`_tally` under the bank's shared lock (held for the scan only)."""
        with self._read_lock():
            return self._tally(progress)

    def verify(self, *, progress: ProgressCallback | None = None) -> BankReport:
        """Check every file of ``memories/`` and ``memories/archive/``, and the ledger.

        Each file is parsed strictly, its id recomputed and compared with the stored ``id``
        and the file name (DESIGN section 5). The ledger is verified (DESIGN section 4)
        against the testimony ``{id: id}`` of every file that verifies, active or archived, so
        archiving never makes a memory missing; a tampered file still named for an id
        testifies ``""`` (which never matches), so the ledger calls that id altered rather
        than missing. ``verify_ledger`` snapshots the ledger (head and size) first, then calls
        back to scan the files (under the bank's shared lock, held for the scan only), then
        walks only the snapshot: a memory is durable before its line is appended, so a save by
        another process racing this verify reads ``unsealed`` at worst, never ``missing``.
        Never changes a file, and never opens a file that is not a regular one: a FIFO,
        socket, device or folder in place of a memory file, the migration index or a root
        file (``bank.lock``, ``ledger.jsonl``, ``ledger.head``, ``ledger.torn``; a symlink
        too, except ``ledger.jsonl``, which raises) is reported as an ``unexpected_file``
        problem and verify goes on; when it is ``ledger.jsonl`` or ``ledger.head``, the
        ledger is not read (``ledger`` is ``None``). A legacy memory file (random id, no
        schema: one ``migrate`` rewrites) is a ``legacy`` problem, not a tampered one; it
        still makes ``ok`` false until it is migrated.

        Args:
            progress: optional ``progress(phase, done, total)`` callback
                (``merkle_memory._progress``): phase ``"files"`` (directory entries
                examined), then ``"ledger"`` (bytes of the ledger walked).

        Returns:
            A :class:`BankReport`; ``ok`` is false when any file is tampered, legacy or not a
            regular file, or the ledger is broken or names an altered or missing memory.

        Raises:
            BankError: the folder is not a bank (``no memory bank at ROOT``: no
                ``memories/`` and no ``ledger.jsonl``), or ``ledger.jsonl`` is a symlink.
            OSError: the ledger exists but cannot be read.
        """
        self._require_root()
        refuse_symlink(self.ledger_path, "ledger.jsonl")
        odd = [
            BankProblem(name, UNEXPECTED_FILE, why)
            for name in _ROOT_FILES
            if (why := special_file(self.root / name)) is not None
        ]
        if any(problem.path in _LEDGER_READS for problem in odd):
            found = self._tally_shared(progress)  # the ledger would block or follow a link
            ledger: dict[str, Any] | None = None
        else:
            scanned: list[Tally] = []

            def testimony() -> dict[str, str | tuple[str, ...]]:
                scanned.append(self._tally_shared(progress))
                return self._testimony(scanned[0])

            ledger = verify_ledger(self.ledger_path, testimony, progress=progress).to_dict()
            found = scanned[0]
        forgotten = set(ledger.get("forgotten", ())) if ledger is not None else set()
        return BankReport(
            active=found.active,
            archived=found.archived,
            problems=(*odd, *found.problems),
            leftovers=found.leftovers,
            ledger=ledger,
            forgotten_links=tuple(
                (rel, link) for rel, link, target in found.memory_links if target in forgotten
            ),
        )

    # --- sealing ---------------------------------------------------------------------------

    def _seal(self, memory_id: str) -> None:
        """Seal a memory just written (``op: "save"``, ``content_sha256 = memory_id``)."""
        self._ledger().append(memory_id, memory_id, op="save")

    def _seal_if_unsealed(self, memory_id: str) -> None:
        """Seal a memory found already on disk (verified) unless the ledger has an entry for
        it: a crash came between its write and its seal (:func:`ledger.seal_if_unsealed`).
        When its latest entry is a ``forget`` (the memory was forgotten, then saved again and
        a crash came before the new seal), it is sealed again. The caller holds the bank's
        exclusive lock."""
        ledger = self._ledger()
        with ledger.locked():
            if seal_if_unsealed(ledger, memory_id, memory_id, op="save"):
                return
            latest = latest_entry(ledger, memory_id)
            if latest is not None and latest.op == "forget":
                ledger.append(memory_id, memory_id, op="save")

    def seal(
        self,
        *,
        problems: list[BankProblem] | None = None,
        progress: ProgressCallback | None = None,
    ) -> SealReport:
        """Adopt every memory file (active or archived) that verifies and has no ledger entry.

        Closes the gap a crash between writing a memory and sealing it leaves, with the
        ledger's adopt algorithm (:func:`merkle_memory.ledger.seal_unsealed`): under the bank
        lock and the ledger lock (so two processes never seal one id twice), a torn ledger
        tail is quarantined, both folders scanned, the ledger verified as ``verify`` would,
        and the ``unsealed`` ids of files that verify appended with ``op: "adopt"`` and
        ``content_sha256 = id``, sorted, in one group commit (``Ledger.append_many``). A
        tampered file is never sealed (DESIGN section 5).

        Args:
            problems: when given, every file of either folder that does not verify (so was
                never sealed) is appended to it, as by :meth:`memories`.
            progress: optional ``progress(phase, done, total)`` callback
                (``merkle_memory._progress``): phase ``"files"``, then ``"ledger"``.

        Returns:
            A :class:`merkle_memory.ledger.SealReport`: ``sealed_ids`` (empty when nothing was
            unsealed), ``report`` (the ledger's verify report after the adoption) and
            ``skipped`` (unsealed ids named only by files that do not verify).

        Raises:
            BankError: the folder is not a bank (nothing is created) or cannot be locked,
                or a folder or ledger file inside it is a symlink.
            LedgerBrokenError: the chain is broken, so nothing is adopted; ``.report`` holds
                the ``VerifyReport``.
            LedgerRollbackError, LedgerFormatError: the ledger went backwards or
                ``ledger.head`` is unreadable (nothing is adopted).
        """

        def holdings() -> Holdings:
            found = self._tally(progress)
            if problems is not None:
                problems.extend(found.problems)
            sealable = {memory_id: memory_id for memory_id in found.valid}
            return Holdings(self._testimony(found), sealable, found.unsealable())

        self._require_root()
        with self._write_lock():
            ledger = self._ledger()
            with ledger.locked():
                settle_forgets(ledger, self.root, self._locate_file)
                return seal_unsealed(ledger, holdings, label=str(self.root), progress=progress)

    # --- writing ---------------------------------------------------------------------------

    def save(self, memory: Memory) -> str:
        """Write ``memory`` into ``memories/`` (read-only, atomic, durable) and seal it.

        Creates the bank when missing: the bank folder itself (its parent must exist),
        ``memories/`` and ``memories/archive/``, atomically (built as
        ``.NAME.creating-PID-TOKEN`` beside it, fsynced, renamed into place).
        Saving a memory that is already in the bank (active or archived) with identical
        bytes writes nothing and returns the same id; it does not un-archive it, and it seals
        the memory only if the ledger has no entry for it (a crash after the write, before
        the seal). A changed memory has a new id, so it
        is a new file and the old file is left untouched. The timestamp is part of the id, so
        the same text saved at another time is another memory: :meth:`add` finds the same
        memory whatever its timestamp.

        In a salted bank (``salted``) an unsalted memory is saved as a salted copy
        (:meth:`Memory.salted`, a fresh random salt), so the id returned is not
        ``memory.id``; saving the same content again finds that copy (same seven core fields,
        active or archived) and returns its id. A memory that already holds a salt is saved
        as it is, in any bank.

        Returns:
            The id of the memory written or found, 64-char lowercase hex.

        Raises:
            BankError: not a ``Memory``; the bank's parent folder does not exist (it is never
                created); the folder is read-only, full or otherwise unwritable (no temp file
                is left); a folder or ledger file inside the bank is a symlink.
            MemoryFormatError: the memory's file (``memory.to_bytes()``) would be larger than
                :data:`~merkle_memory.bank.memory.MAX_MEMORY_FILE_BYTES` (16 MiB), the most
                the bank reads back; refused before anything is created or written.
            TamperedMemoryError: a file with this id exists but its bytes differ (left as is).
            LedgerError: the ledger refused the seal (the memory file is already durable).
        """
        if not isinstance(memory, Memory):
            raise BankError(f"save takes a Memory, not {type(memory).__name__}")
        data = _check_file_size(memory.to_bytes())
        with self._write_lock(create=True):
            chosen = self._salted_for_saving(memory)
            self._save_unlocked(chosen, data if chosen is memory else None)
        return chosen.id

    def add(
        self,
        type: str,
        scope: str,
        content: str,
        *,
        tags: Sequence[str] = (),
        source_session: str | None = None,
        links: Sequence[str] = (),
        timestamp: datetime | None = None,
    ) -> AddResult:
        """Save a memory unless the same memory is already in the bank (``bank add``).

        "The same memory" is one with the same type, scope, content (byte-exact), tags,
        source session and links (tags and links as sets), whatever its timestamp: without
        ``timestamp``, such a memory already in the bank (active first, then archived; the
        earliest if several) is returned and nothing is written (it is sealed if a crash
        left it unsealed); otherwise a new memory is saved with the time now. With
        ``timestamp`` the time is part of what is saved, as in :meth:`save`: the same fields
        at that time give the same id and write nothing; at another time a new memory. Under
        the bank's exclusive lock, so two processes adding the same memory at once save it
        once. Finding it reads the files of that type (O(files of the type)).

        Args:
            type: a slug ``[a-z0-9_-]+``.
            scope: free text.
            content: the text, byte-exact.
            tags: tags (any order, duplicates ignored).
            source_session: the session it came from, or ``None``.
            links: URIs (any order, duplicates ignored).
            timestamp: timezone-aware; default: now, unless the same memory exists.

        Returns:
            An :class:`AddResult`: the memory as stored (where, active or archived) and
            whether it was written now.

        Raises:
            MemoryFormatError: an invalid field, or a file over the size limit.
            BankError, TamperedMemoryError, LedgerError: as :meth:`save`.
        """
        memory = Memory(
            type,
            scope,
            content,
            tags,
            timestamp if timestamp is not None else datetime.now(UTC),
            source_session,
            links,
        )
        data = _check_file_size(memory.to_bytes())
        with self._write_lock(create=True):
            if timestamp is None and (same := self._find_same(memory)) is not None:
                self._seal_if_unsealed(same.memory.id)
                return AddResult(same, created=False)
            chosen = self._salted_for_saving(memory)  # a salted bank salts it (or finds it)
            created = self._save_unlocked(chosen, data if chosen is memory else None)
            path, archived = self._find(chosen.id) or (self.active_dir / chosen.file_name, False)
            return AddResult(StoredMemory(chosen, archived, self._rel(path)), created)

    def _find_same(self, memory: Memory) -> StoredMemory | None:
        """The stored memory with ``memory``'s fields but the timestamp (active first, then
        archived; the earliest), among the files that verify. Reads only files whose name
        carries the same type."""

        def fields(m: Memory) -> tuple[object, ...]:
            return (m.type, m.scope, m.content, m.tags, m.source_session, m.links)

        wanted = fields(memory)
        for folder, archived in ((self.active_dir, False), (self.archive_dir, True)):
            matches = []
            for name in self._names(folder):
                if name[_NAME_TYPE] != memory.type or id_from_name(name) is None:
                    continue
                found = inspect_file(folder / name).memory
                if found is not None and fields(found) == wanted:
                    matches.append(found)
            if matches:
                first = min(matches, key=lambda m: (m.timestamp, m.id))
                return StoredMemory(first, archived, self._rel(folder / first.file_name))
        return None

    def _save_unlocked(self, memory: Memory, data: bytes | None = None) -> bool:
        """Write and seal unless already present (then seal if unsealed); True when written."""
        data = _check_file_size(memory.to_bytes() if data is None else data)
        if os.path.lexists(self.root / FORGOTTEN_DIR / f"{memory.id}.json.pending"):
            # A forget of this id was interrupted: finish or drop it before saving again.
            settle_forgets(self._ledger(), self.root, self._locate_file, only=memory.id)
        found = self._find(memory.id)
        if found is not None:
            path, _archived = found
            if path.name != memory.file_name or read_regular(path) != data:
                raise TamperedMemoryError(
                    f"{self._rel(path)} carries id {memory.id} but differs from it; "
                    "run `bank verify`",
                    self._rel(path),
                )
            self._seal_if_unsealed(memory.id)
            return False
        target = self.active_dir / memory.file_name
        try:
            atomic_write(target, data, mode=0o444)
        except OSError as exc:
            raise BankError(f"cannot write {self._rel(target)}: {_why(exc)}") from exc
        self._seal(memory.id)
        return True

    def forget(self, memory_id: str, reason: str) -> ForgetReceipt:
        """Erase the memory ``memory_id`` (active or archived) and seal a tombstone (issue 20).

        The ledger's forget algorithm (:func:`merkle_memory.ledger.tombstones.forget_record`)
        under the bank lock and the ledger lock: the tombstone is written durably as
        ``forgotten/<id>.json.pending``, its ``op: "forget"`` line appended and fsynced, the
        memory file removed and its folder fsynced, the tombstone renamed into place. A crash
        at any step leaves the memory sealed or forgotten, never missing; ``seal`` (or
        forgetting again) finishes the job. The tombstone ``retires`` the id (a bank's
        testimony). Verify then lists the id as ``forgotten`` in its ledger report, and the
        links of other memories to it (a consolidation's ``mm://memory/<id>``) as
        ``forgotten_links``, never as a failure. In a salted bank the id cannot be linked to
        the content once the file is gone; in an unsalted one it can be brute-forced from
        guesses of short content.

        Args:
            memory_id: 64-char lowercase hex.
            reason: why, kept in the tombstone (at most 4096 characters; never the content).

        Returns:
            A :class:`~merkle_memory.ledger.ForgetReceipt`; forgetting a forgotten id appends
            nothing, removes a file put back since, and returns the earlier receipt.

        Raises:
            BankError: not a memory id, the folder is not a bank, or a bad reason (empty,
                too long, not a string).
            MemoryNotFoundError: no file and no ledger entry carries that id (nothing is
                created).
            LedgerBrokenError: the bank's ledger chain is broken (checked first; nothing
                changes).
            LedgerError: the ledger refused the append (the memory stays, sealed).
        """
        memory_id = _check_id(memory_id)
        try:
            reason = check_reason(reason)
        except LedgerError as exc:
            raise BankError(str(exc)) from exc
        self._require_root()

        def nothing(mid: str) -> Exception:
            return MemoryNotFoundError(f"no memory {mid} in {self.root}", mid)

        with self._write_lock():
            return forget_record(
                self._ledger(),
                self.root,
                memory_id,
                reason,
                self._locate_file,
                lambda _path: memory_id,
                nothing,
            )

    def _locate_file(self, memory_id: str) -> Path | None:
        """The file named for ``memory_id`` (active first), or ``None``."""
        found = self._find(memory_id)
        return None if found is None else found[0]

    def _testimony(self, found: Tally) -> dict[str, str | tuple[str, ...]]:
        """``found.testimony`` plus, for a memory whose forget is under way (its tombstone
        pending, the file still there), the tombstone's digest: the id reads ``forgotten``."""
        out: dict[str, str | tuple[str, ...]] = dict(found.testimony)
        for mid, tomb in scan_pending_tombstones(self.root).items():
            if mid in out:
                current = out[mid]
                out[mid] = (current, tomb.digest()) if isinstance(current, str) else current
        return out

    def archive(self, memory_id: str) -> str:
        """Move the memory ``memory_id`` into ``memories/archive/`` (never rewritten).

        ``os.replace`` into the archive, then both folders fsynced. Archiving an archived
        memory is a no-op.

        Returns:
            The archived file's path relative to the bank (``memories/archive/...``).

        Raises:
            BankError: not a memory id, the folder is not a bank (nothing is created), or
                the move failed (the file stays active).
            MemoryNotFoundError: no file carries that id (nothing is created).
        """
        memory_id = _check_id(memory_id)
        self._require_root()
        self._require_all((memory_id,))  # fail before the lock creates bank.lock
        with self._write_lock():
            return self._rel(self._archive_unlocked(memory_id))

    def _archive_unlocked(self, memory_id: str) -> Path:
        found = self._find(memory_id)
        if found is None:
            raise MemoryNotFoundError(f"no memory {memory_id} in {self.root}", memory_id)
        source, archived = found
        target = self.archive_dir / source.name
        if archived:
            return source
        try:
            self._ensure_dir(self.archive_dir)
            if os.path.lexists(target):
                # A copy is already archived: drop the active one only if it is identical.
                if read_regular(target) != read_regular(source):
                    raise TamperedMemoryError(
                        f"{self._rel(target)} exists and differs from {self._rel(source)}",
                        self._rel(target),
                    )
                fsync_dir(self.archive_dir)
                os.unlink(source)
            else:
                os.replace(source, target)
                fsync_dir(self.archive_dir)
            fsync_dir(self.active_dir)
        except OSError as exc:
            raise BankError(f"cannot archive {self._rel(source)}: {_why(exc)}") from exc
        return target

    def consolidate(
        self,
        ids: Sequence[str],
        content: str,
        *,
        type: str | None = None,
        scope: str | None = None,
        tags: Iterable[str] = (),
        source_session: str | None = None,
        timestamp: datetime | None = None,
    ) -> str:
        """Write one memory summarizing ``ids``, linked to each, then archive the originals.

        The new memory's links are ``mm://memory/<id>`` of each original. Two steps under the
        bank lock, each durable before the next starts: (1) write and seal the new memory;
        (2) archive the originals. A crash between steps leaves a bank that verifies (the
        originals still active and sealed, the new memory written and sealed); a rerun with
        the same arguments finds the memory already written (same type, scope, content and
        links, active or archived; the earliest if several) instead of writing a second one
        with a new timestamp, seals it if a crash came between its write and its seal, and
        only finishes the archiving.

        Args:
            ids: ids of the originals (64-char lowercase hex), at least one; duplicates ignored.
            content: the consolidated text (byte-exact).
            type: the new memory's type; default: the originals' type when they share one.
            scope: the new memory's scope; default: the originals' scope when they share one.
            tags: tags of the new memory.
            source_session: source session of the new memory.
            timestamp: timezone-aware; default now.

        Returns:
            The new (or found) memory's id.

        Raises:
            BankError: no ids, a malformed id, the folder is not a bank (nothing is
                created), originals of different types or scopes with no ``type``/``scope``
                given, or a failed write.
            MemoryNotFoundError: an original is not in the bank (nothing is written).
            TamperedMemoryError: an original does not verify (nothing is written).
            MemoryFormatError: the new memory is invalid (e.g. a non-slug type).
        """
        if isinstance(ids, (str, bytes)):
            raise BankError("consolidate takes a sequence of ids, not one string")
        if not isinstance(ids, Iterable):
            raise BankError(f"consolidate takes a sequence of ids, not {ids.__class__.__name__}")
        wanted = sorted({_check_id(memory_id) for memory_id in ids})
        if not wanted:
            raise BankError("consolidate needs at least one memory id")
        if not isinstance(content, str):
            raise BankError(f"content must be a string, not {content.__class__.__name__}")
        self._require_root()
        self._require_all(wanted)  # fail before the lock creates bank.lock
        with self._write_lock():
            originals = [self._load_id(memory_id)[2] for memory_id in wanted]
            kind = type if type is not None else _common((m.type for m in originals), "type")
            where = scope if scope is not None else _common((m.scope for m in originals), "scope")
            links = tuple(memory_uri(i) for i in wanted)
            done = self._find_consolidated(kind, where, content, links)
            if done is None:
                done = self._salted_for_saving(
                    Memory(
                        kind,
                        where,
                        content,
                        tuple(tags),
                        timestamp if timestamp is not None else datetime.now(UTC),
                        source_session,
                        links,
                    )
                )
                self._save_unlocked(done)
            else:
                # Found on a rerun: a crash may have come between its write and its seal.
                self._seal_if_unsealed(done.id)
            for memory_id in wanted:
                self._archive_unlocked(memory_id)
        return done.id

    def _find_consolidated(
        self, kind: str, scope: str, content: str, links: tuple[str, ...]
    ) -> Memory | None:
        """The earliest memory (active or archived) with this type, scope, content and links."""
        matches = [
            memory
            for memory, _archived, _rel in self._scan(None)
            if (memory.type, memory.scope, memory.content, memory.links)
            == (kind, scope, content, links)
        ]
        return min(matches, key=lambda m: (m.timestamp, m.id), default=None)

    # --- migration -------------------------------------------------------------------------

    def migrate(self, *, progress: ProgressCallback | None = None) -> MigrationReport:
        """Rewrite legacy memory files (random ids, a ``status``) as content-addressed files.

        The rules (DESIGN section 5) are in :mod:`merkle_memory.bank._migrate`: same folder
        unless the legacy status archives it, status and legacy id dropped, naive timestamps
        read as UTC, links converted and rewritten in dependency order (the migration index
        ``memories/.migrated.json`` remembers earlier runs), idempotent. Three steps under the
        bank lock: (1) in dependency order, write each new file durably and seal it (or find
        its identical twin, sealed if a crash left it unsealed); (2) record the run's ids in
        the index; (3) in reverse order, remove each legacy file whose replacement is durable.

        Args:
            progress: optional ``progress(phase, done, total)`` callback
                (``merkle_memory._progress``): phase ``"reading"`` (directory entries
                examined), then ``"migrating"`` (legacy files written or skipped).

        Returns:
            A ``MigrationReport`` (``migrated`` is 0 on a rerun).

        Raises:
            BankError: the folder is not a bank (nothing is created), cannot be locked, holds
                a symlinked folder, or its migration index is unreadable or cannot be written
                (then no legacy file is removed). Per-file failures are reported, never raised.
            LedgerError: the ledger refused a seal (files written so far stay, durable and
                sealed; legacy files are not removed, so a rerun finishes the job).
        """
        self._require_root()
        report = ReportBuilder()
        with self._write_lock():
            earlier = self._read_index()
            legacy = unique_ids(self._legacy_files(report, progress), report)
            new_ids: dict[str, str] = {}
            done: list[Legacy] = []
            handled = 0
            for component, is_cycle in dependency_order(legacy):
                if is_cycle:
                    report.cycles.append(tuple(component))
                for lid in component:
                    handled += 1
                    if progress is not None:
                        progress("migrating", handled, len(legacy))
                    item = legacy[lid]
                    try:
                        memory = replacement(item, new_ids, earlier, legacy)
                        self._write_migrated(item, memory)
                    except (NotLegacy, MemoryFormatError) as exc:
                        report.skip(item.rel, str(exc))
                        continue
                    except (OSError, BankError) as exc:
                        report.skip(item.rel, f"could not write its replacement: {exc}")
                        continue
                    item.memory = memory
                    done.append(item)
                # Only now: links between members of one cycle keep the legacy id.
                for lid in component:
                    if (memory_done := legacy[lid].memory) is not None:
                        new_ids[lid] = memory_done.id
            if (merged := merged_index(earlier, done)) is not None:
                self._write_index(merged)
            self._remove_legacy(done, report)
            self._remove_tur_folders()
        return report.build(done)

    def _legacy_folders(self, report: ReportBuilder) -> list[tuple[Path, str | None]]:
        """The folders a migration reads: ``memories/``, Tur's ``active/`` and ``subsumed/``
        inside it when they are real folders, and ``memories/archive/``; each with its Tur
        folder name (``None`` for ``memories/``)."""
        folders: list[tuple[Path, str | None]] = [(self.active_dir, None)]
        for name in TUR_FOLDERS:
            path = self.active_dir / name
            try:
                if real_dir(path, f"memories/{name}/"):
                    folders.append((path, name))
            except BankError as exc:
                report.skip(f"memories/{name}", str(exc))
        return folders

    def _legacy_files(
        self, report: ReportBuilder, progress: ProgressCallback | None = None
    ) -> list[Legacy]:
        """Read every legacy file of the migrated folders; report the files that are not
        legacy. ``.md`` files are Tur's OKF memories (in Tur's folders only). ``progress``,
        phase ``"reading"``, counts the names listed."""
        yaml = yaml_module()
        found: list[Legacy] = []
        listed = [
            (folder, tur_folder, self._names(folder))
            for folder, tur_folder in self._legacy_folders(report)
        ]
        total = sum(len(names) for _folder, _tur, names in listed)
        seen = 0
        for folder, tur_folder, names in listed:
            in_archive = tur_folder is not None and TUR_FOLDERS[tur_folder] is not None
            for name in names:
                seen += 1
                if progress is not None and (seen % EVERY == 0 or seen == total):
                    progress("reading", seen, total)
                path = folder / name
                rel = self._rel(path)
                if tur_folder is None and name in (*TUR_FOLDERS, INDEX_NAME):
                    continue  # a Tur folder is read next (or reported by _legacy_folders)
                if is_temp_name(name):
                    continue
                try:
                    mode = os.lstat(path).st_mode
                except FileNotFoundError:
                    continue
                if stat.S_ISDIR(mode):
                    report.skip(
                        rel,
                        "a folder (migrate reads memories/ and its folders "
                        "active/, archive/ and subsumed/ only)",
                    )
                    continue
                if not stat.S_ISREG(mode):
                    report.skip(rel, "not a regular file (symlinks are never followed)")
                    continue
                okf = name.endswith(OKF_SUFFIX) and tur_folder is not None
                if (okf or name.endswith(YAML_SUFFIXES)) and yaml is None:
                    report.skip(rel, "YAML needs PyYAML (install the extra merkle_memory[yaml])")
                    continue
                if not okf and not name.endswith((".json", *YAML_SUFFIXES)):
                    report.skip(
                        rel,
                        "not a legacy memory file (.json, .yaml or .yml; Tur's .md files in "
                        "memories/active/, archive/ or subsumed/)",
                    )
                    continue
                if name.endswith(".json") and inspect_file(path).memory is not None:
                    continue  # already content-addressed
                try:
                    if okf:
                        assert tur_folder is not None
                        found.append(read_okf(path, rel, yaml, folder=tur_folder))
                    else:
                        found.append(read_legacy(path, rel, yaml, in_archive=in_archive))
                except NotLegacy as exc:
                    report.skip(rel, str(exc))
                except (ValueError, BankError, OSError) as exc:
                    report.unparseable.append(MigrationIssue(rel, f"unparseable: {exc}"))
        return found

    def _remove_tur_folders(self) -> None:
        """Remove Tur's ``memories/active/`` and ``memories/subsumed/`` when empty (after the
        migration emptied them), so the bank layout is this library's again."""
        removed = False
        for name in TUR_FOLDERS:
            if name == "archive":
                continue
            with contextlib.suppress(OSError):  # absent, not empty, or not a real folder
                os.rmdir(self.active_dir / name)
                removed = True
        if removed:
            fsync_dir(self.active_dir)

    def _write_migrated(self, item: Legacy, memory: Memory) -> None:
        """Step 1 for one file: write and seal, or find an identical twin; sets ``item.final``.

        Raises:
            NotLegacy: a content-addressed twin exists and differs (skip, untouched).
            BankError, OSError: the write failed (skip, untouched).
        """
        data = memory.to_bytes()
        folder = self.archive_dir if item.archived else self.active_dir
        target = folder / memory.file_name
        twin = self._find(memory.id)
        if twin is not None and twin[0] != item.path:
            if read_regular(twin[0]) != data:
                rel = self._rel(twin[0])
                raise NotLegacy(f"its content-addressed twin {rel} exists and differs; left as is")
            fsync_dir(twin[0].parent)  # the twin is durable before the legacy file goes
            self._seal_if_unsealed(memory.id)  # a crash may have come between write and seal
            item.twin = True
            item.final = twin[0]
            return
        if item.archived:
            self._ensure_dir(self.archive_dir)
        atomic_write(target, data, mode=0o444)
        self._seal(memory.id)
        item.final = target

    def _read_index(self) -> dict[str, str]:
        """The bank's ``{legacy id: new id}`` migration index (empty when there is none).

        Raises:
            BankError: the index exists but is a symlink, a special file or malformed (the
                migration must not go on and overwrite it).
        """
        path = self.active_dir / INDEX_NAME
        if not os.path.lexists(path):
            return {}
        try:
            return parse_index(read_regular(path))
        except (BankError, OSError) as exc:
            raise BankError(
                f"cannot read the migration index memories/{INDEX_NAME}: {exc}; restore it or "
                "remove it (links to memories migrated earlier then stay unresolved)"
            ) from exc

    def _write_index(self, ids: dict[str, str]) -> None:
        """Step 2: replace the migration index with ``ids`` (atomic, durable, mode 0o644),
        before any legacy file goes."""
        try:
            atomic_write(self.active_dir / INDEX_NAME, index_bytes(ids), mode=0o644)
        except OSError as exc:
            raise BankError(
                f"cannot write the migration index memories/{INDEX_NAME}: "
                f"{_why(exc)}; no legacy file was removed (run migrate again)"
            ) from exc

    def _remove_legacy(self, done: list[Legacy], report: ReportBuilder) -> None:
        """Step 3: remove legacy files, dependents first, each after its replacement is
        durable; record each migrated file in ``report``."""
        touched: set[Path] = set()
        for item in reversed(done):
            assert item.memory is not None and item.final is not None
            if item.path != item.final:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(item.path)
                touched.add(item.path.parent)
            report.files.append(
                MigratedFile(
                    path=item.rel,
                    new_path=self._rel(item.final),
                    legacy_id=item.legacy_id,
                    id=item.memory.id,
                    naive_timestamp=item.naive,
                    status=item.status if isinstance(item.status, str) else None,
                    twin_existed=item.twin,
                    new_status="archived" if item.final.parent == self.archive_dir else "active",
                )
            )
        for folder in touched:
            fsync_dir(folder)


def _reappeared_reason(memory_id: str) -> str:
    """Why a file of a forgotten memory is refused (``get``) or not listed (``memories``)."""
    return (
        f"memory {memory_id} was forgotten (forgotten/{memory_id}.json) and its file "
        "reappeared (restored from a backup?): forget it again to remove it"
    )
