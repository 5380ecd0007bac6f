"""Folders, locks and file lookup of a memory bank (private; base of ``MemoryBank``).

DESIGN section 5 layout: ``BANK/memories/`` (active), ``BANK/memories/archive/`` (archived),
``BANK/ledger.jsonl`` and its ``ledger.head``/``ledger.torn``, ``BANK/bank.lock``. A folder is
a bank when it holds ``memories/`` or ``ledger.jsonl``; only a save creates one (the bank
folder itself, never its missing parents). No folder or root file inside the bank is ever
followed through a symlink. Writers hold an exclusive ``flock`` on ``bank.lock``; readers a
shared one when the file exists (none is created).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from .._fsio import exclusive_lock, fsync_dir, makedirs_durable
from ..errors import BankError, TamperedMemoryError
from . import _files as _bankfs
from ._files import inspect_file, real_dir, refuse_symlink
from .memory import Memory

__all__ = ["BankLayout"]

_ROOT_FILES: Final = ("bank.lock", "ledger.jsonl", "ledger.head", "ledger.torn")


class BankLayout:
    """The paths of a bank folder, its locks and file lookup (no public methods).

    Args:
        root: the bank folder (it may itself be a symlink; nothing inside it is followed).

    Attributes:
        root: the bank folder.
        active_dir: ``root/memories`` (active memories, L1).
        archive_dir: ``root/memories/archive`` (archived memories, L0).
        ledger_path: ``root/ledger.jsonl``.
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        if not isinstance(root, str | os.PathLike):
            raise BankError(f"bank root must be a str or os.PathLike, not {type(root).__name__}")
        self.root = Path(root)
        self.active_dir = self.root / "memories"
        self.archive_dir = self.active_dir / "archive"
        self.ledger_path = self.root / "ledger.jsonl"

    # --- locking and folders -------------------------------------------------------------

    def _check_layout(self) -> bool:
        """True when the bank's folders exist; BankError on a symlinked or non-folder part."""
        if not self.root.is_dir():
            return False
        for name in _ROOT_FILES:
            refuse_symlink(self.root / name, name)
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
        """Create the bank folder (never its missing parents), ``memories/`` and ``archive/``.

        Raises:
            BankError: the parent folder does not exist, the bank path is not a folder, or
                the folders cannot be created.
            OSError: fsync of a folder failed.
        """
        try:
            os.mkdir(self.root)
        except FileExistsError:
            pass
        except FileNotFoundError as exc:
            raise BankError(
                f"cannot create the bank {self.root}: the folder {self.root.parent} does not "
                "exist (create it first)"
            ) from exc
        except OSError as exc:
            raise BankError(f"cannot create the bank {self.root}: {_why(exc)}") from exc
        else:
            fsync_dir(self.root.parent)
        if not self.root.is_dir():
            raise BankError(f"no memory bank at {self.root} (not a folder)")
        self._check_layout()
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
                yield
        except OSError as exc:
            raise BankError(f"cannot write to the bank {self.root}: {_why(exc)}") from exc

    @contextlib.contextmanager
    def _read_lock(self) -> Iterator[None]:
        """Hold a shared lock when a writer ever ran here (no file is created)."""
        try:
            fd = os.open(self.root / "bank.lock", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            yield
        finally:
            os.close(fd)

    # --- finding files -------------------------------------------------------------------

    def _names(self, folder: Path) -> list[str]:
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
                if name.endswith(suffix) and _bankfs.id_from_name(name) == memory_id:
                    return folder / name, archived
        return None

    def _rel(self, path: Path) -> str:
        return path.relative_to(self.root).as_posix()

    def _load(self, path: Path) -> Memory:
        found = inspect_file(path)
        if found.memory is None:
            raise TamperedMemoryError(f"{self._rel(path)}: {found.reason}", self._rel(path))
        return found.memory


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)
