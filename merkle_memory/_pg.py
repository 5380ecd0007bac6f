"""PostgreSQL connections for the database backends (private; the extra ``postgres``).

The ledger (``ledger._postgres``) and the node store (``dag._postgres``) keep their data in
PostgreSQL when given a ``postgresql://`` URL (libpq's URI form, ``postgres://`` too) instead of
a path. A ledger URL names its tenant in the fragment: ``postgresql:///agents?host=/run/pg#cc``
is tenant ``cc`` of database ``agents`` reached through the Unix socket in ``/run/pg``; a node
store URL has no fragment. The fragment is this library's: it is removed before the rest is
handed to libpq.

The driver, psycopg 3, is imported on first use only (the core stays standard-library only):
without it every call raises :class:`~merkle_memory.errors.DatabaseError` saying which extra to
install. Connections run in autocommit mode with ``synchronous_commit = on`` (a ``COMMIT``
returns only once the server has flushed it to its write-ahead log), and every failure of the
driver reaches callers as ``DatabaseError`` carrying the SQLSTATE and the URL without its
password.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
from collections.abc import Iterator
from typing import Any, Final

from ._fork import renew_in_child
from .errors import DatabaseError

__all__ = ["SCHEMES", "TUPLES_OK", "Pool", "driver", "is_url", "redact", "split_url", "translate"]

SCHEMES: Final = ("postgresql://", "postgres://")
TUPLES_OK: Final = 2  # libpq's PGRES_TUPLES_OK (``psycopg.pq.ExecStatus.TUPLES_OK``)
INSTALLER_LOCK: Final = 0x6D6D0001
"""The advisory lock key every installer of this package's tables takes for its transaction
(``pg_advisory_xact_lock``): the node store's, the ledger's and the tenant tables'. Advisory
keys are database-wide and these installers create shared tables (``mm_schema``) with
``CREATE ... IF NOT EXISTS``, which two concurrent transactions can both attempt (one then fails
with a duplicate-object error): so one key for all of them, one installer at a time in a
database. The node store's write lock is ``0x6D6D0002``."""
"""URL prefixes that select the PostgreSQL backend wherever a path is taken."""

_PASSWORD_IN_NETLOC: Final = re.compile(r"((?:postgresql|postgres)://[^/@:\s]*):[^/@\s]*@")
# Any parameter whose name holds "password", in any case (libpq's ``password`` and
# ``sslpassword``; a misspelt ``Password`` is echoed by libpq's refusal), in a URL's query or
# as a ``keyword=value`` word of a message: the value up to the next ``&``, ``#``, quote or
# space.
_PASSWORD_PARAM: Final = re.compile(
    r"((?:^|[?&\s\"'(])[A-Za-z_]*password=)[^&#\s\"']*", re.IGNORECASE
)


def is_url(value: object) -> bool:
    """Whether ``value`` is a ``str`` naming a PostgreSQL database (``postgresql://...``)."""
    return isinstance(value, str) and value.startswith(SCHEMES)


def redact(url: str) -> str:
    """``url`` with any password (``user:secret@``, or the value of a parameter whose name
    holds ``password`` in any case: ``password=``, ``sslpassword=``) replaced by ``***``.

    ``url`` may also be a message quoting one or more URLs anywhere in it: the CLI passes
    every error line, hint and JSON key that may show a URL through here (one place).
    """
    url = _PASSWORD_IN_NETLOC.sub(r"\1:***@", url)
    return _PASSWORD_PARAM.sub(r"\1***", url)


def split_url(url: str) -> tuple[str, str | None]:
    """Split a PostgreSQL URL into the part libpq reads and this library's fragment.

    Args:
        url: ``postgresql://...`` (or ``postgres://...``), optionally ``#fragment``.

    Returns:
        ``(conninfo, fragment)``: the URL without its fragment, and the fragment (``None``
        when there is no ``#``; ``""`` for a bare ``#``).

    Raises:
        DatabaseError: ``url`` is not a PostgreSQL URL.
    """
    if not is_url(url):
        raise DatabaseError(f"not a PostgreSQL URL (postgresql://...): {url!r:.80}")
    conninfo, hash_mark, fragment = url.partition("#")
    return conninfo, (fragment if hash_mark else None)


def driver() -> Any:
    """The psycopg 3 module, imported on first use.

    Raises:
        DatabaseError: psycopg is not installed (``pip install 'merkle_memory[postgres]'``).
    """
    try:
        import psycopg
    except ImportError as exc:
        raise DatabaseError(
            f"PostgreSQL support needs psycopg 3: pip install 'merkle_memory[postgres]' ({exc})"
        ) from None
    return psycopg


def translate(exc: BaseException, url: str, doing: str) -> DatabaseError:
    """The :class:`DatabaseError` for a driver failure ``exc`` while ``doing`` something."""
    sqlstate = getattr(exc, "sqlstate", None)
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    state = f" [{sqlstate}]" if sqlstate else ""
    return DatabaseError(f"{redact(url)}: cannot {doing}: {first}{state}", redact(url), sqlstate)


class Pool:
    """A small thread-safe pool of autocommit connections to one database.

    Args:
        url: the PostgreSQL URL (its fragment, if any, is ignored here).
        max_idle: how many idle connections are kept for reuse.
        settings: ``(name, value)`` pairs set on every new connection (``SET``), after
            ``synchronous_commit = on``.

    A connection is handed to one thread at a time (:meth:`connection`) and returned to the
    pool only when it is healthy and outside any transaction; otherwise it is closed.
    Processes never share a connection: a forked child makes its own (also when another
    thread of the parent was inside the pool at the fork), and a connection lent before the
    fork and given back in the child is dropped there, neither reused nor closed (its socket
    is the parent's session: closing it would send that session's termination).

    Raises:
        DatabaseError: ``url`` is not a PostgreSQL URL.
    """

    def __init__(
        self, url: str, *, max_idle: int = 4, settings: tuple[tuple[str, str], ...] = ()
    ) -> None:
        self.conninfo, _fragment = split_url(url)
        self._settings = settings
        self.label = redact(self.conninfo)
        self._max_idle = max_idle
        self._idle: list[Any] = []
        self._mine: set[int] = set()  # id() of each live connection this process made
        self._lock = threading.Lock()
        self._pid = os.getpid()
        renew_in_child(self)

    def __repr__(self) -> str:
        return f"Pool({self.label!r})"

    def _after_fork_in_child(self) -> None:
        """In a forked child (``_fork.renew_in_child``): a new ``_lock``, no idle connection
        and none of the child's own. The lock guards short sections that run no user code, so
        only a parent thread that does not exist in the child can have held it (``take``
        would wait for it forever). Every connection made so far is the parent's: the idle
        ones are forgotten, never closed (closing would end the parent's sessions), and
        :meth:`give` drops one that was lent before the fork. :meth:`take` calls it too when
        the process id changed without it (a fork that ran no at-fork hooks)."""
        self._lock = threading.Lock()
        self._idle = []
        self._mine = set()
        self._pid = os.getpid()

    def _connect(self) -> Any:
        psycopg = driver()
        try:
            conn = psycopg.connect(self.conninfo, autocommit=True)
            conn.execute("SET synchronous_commit = on")
            for name, value in self._settings:
                conn.execute("SELECT set_config(%s, %s, false)", (name, value))
        except psycopg.Error as exc:
            raise translate(exc, self.conninfo, "connect") from None
        return conn

    def take(self) -> Any:
        """Borrow one connection (autocommit, ``synchronous_commit = on``): an idle one, or a
        new one. Give it back with :meth:`give`.

        Raises:
            DatabaseError: no connection can be made.
        """
        if self._pid != os.getpid():
            self._after_fork_in_child()
        with self._lock:
            conn = self._idle.pop() if self._idle else None
        if conn is None or conn.closed:
            if conn is not None:
                self._forget(conn)
            conn = self._connect()
            with self._lock:
                self._mine.add(id(conn))
        return conn

    def _forget(self, conn: Any) -> None:
        with self._lock:
            self._mine.discard(id(conn))

    def give(self, conn: Any, *, healthy: bool) -> None:
        """Take back a connection lent by :meth:`take`: kept for the next borrower when
        ``healthy`` (the work on it ended normally), open and idle outside any transaction,
        and fewer than the pool's idle maximum are kept; closed otherwise. One this process
        did not make (lent before a fork, given back in the child) is only dropped: its
        socket belongs to the parent's session."""
        # libpq's own status (0: PQTRANS_IDLE), not psycopg's enum: this runs per append
        keep = healthy and not conn.closed and conn.pgconn.transaction_status == 0
        with self._lock:
            if id(conn) not in self._mine:
                return  # the parent's: never reused, never closed here
            keep = keep and len(self._idle) < self._max_idle
            if keep:
                self._idle.append(conn)
            else:
                self._mine.discard(id(conn))
        if not keep:
            with contextlib.suppress(Exception):
                conn.close()

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """Lend one connection (autocommit, ``synchronous_commit = on``) for a block
        (:meth:`take`, then :meth:`give` at its end).

        Raises:
            DatabaseError: no connection can be made; the block's own driver errors pass
                through unchanged (the callers translate them).
        """
        conn = self.take()
        healthy = False
        try:
            yield conn
            healthy = True
        finally:
            self.give(conn, healthy=healthy)

    def close(self) -> None:
        """Close every idle connection (connections lent out close when returned)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._mine.difference_update(map(id, idle))
        for conn in idle:
            with contextlib.suppress(Exception):
                conn.close()
