"""A transparency-log witness (c2sp.org/tlog-witness): cosign only consistent checkpoints.

``Witness`` answers ``add-checkpoint`` requests. The request body is::

    old <size of the previous checkpoint, decimal>
    <base64 consistency proof hash>          (zero to 63 lines)
    <empty line>
    <the new signed checkpoint>

and the answers are the spec's: **200** with the cosignature lines (``cosignature/v1``,
``text/plain; charset=utf-8``); **404** the checkpoint's origin is not a known log; **403** no
signature by the log's keys verifies (or one of them fails); **400** a malformed request, or
``old`` larger than the checkpoint's size; **409** ``old`` is not the size this witness last
cosigned for the log (body: that size and a newline, ``Content-Type: text/x.tlog.size``), or the
same size with another root; **422** the consistency proof does not verify (or is not empty
when ``old`` is 0 or the sizes are equal).

State lives in SQLite (``sqlite3``, WAL, ``synchronous=FULL``): table ``checkpoints`` (the latest
cosigned checkpoint of each origin: size, root, note) and ``history`` (every size cosigned, with
its root; primary key (origin, size), so the database itself refuses a second root for a size).
The size check and the state update are one ``BEGIN IMMEDIATE`` transaction, committed before
the cosignature is made and sent: a crash (even a kill mid-request) leaves either the old state
(nothing was cosigned) or the new one (the client, answered 409, asks again from that size and
gets the same root cosigned). Two requests never both pass the check against one state, so the
witness never cosigns two different roots for one size, nor rolls back.

``WitnessServer`` serves a ``Witness`` over HTTP (stdlib ``http.server``, one thread a
connection, HTTP/1.1 keep-alive): ``POST <prefix>/add-checkpoint``. ``WitnessClient`` is the
log's side: it posts a request and turns the answer into cosignature lines or a
``WitnessError`` carrying the status (and, for 409, the size).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import logging
import math
import os
import re
import sqlite3
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

from ..checkpoint import Checkpoint
from ..errors import CheckpointError, ProofError, WitnessError
from ..proof import verify_consistency
from ..rfc6962 import EMPTY_ROOT, HASH_SIZE
from ..signed_note import (
    CosignatureSigner,
    CosignatureVerifier,
    Verifier,
    open_note,
    parse_note,
    sign_note,
)

__all__ = [
    "ADD_CHECKPOINT",
    "MAX_BODY",
    "MAX_PROOF_LINES",
    "MAX_TIMEOUT",
    "SIZE_CONTENT_TYPE",
    "AddCheckpointRequest",
    "Witness",
    "WitnessClient",
    "WitnessResponse",
    "WitnessServer",
    "WitnessState",
]

log = logging.getLogger("merkle_memory.witness")

ADD_CHECKPOINT = "add-checkpoint"
"""The endpoint, below the witness's submission prefix."""

SIZE_CONTENT_TYPE = "text/x.tlog.size"
"""Content type of a 409 answer's body (the size the witness holds)."""

MAX_PROOF_LINES = 63
"""Most consistency proof lines a request may hold (tlog-witness)."""

MAX_BODY = 1 << 20
"""Largest request body accepted, in bytes (a checkpoint with many signatures fits)."""

MAX_TIMEOUT = 86_400.0
"""Longest timeout a client waits for a witness, in seconds (one day)."""

_OLD = re.compile(r"old (0|[1-9][0-9]{0,18})\Z")
_TEXT = "text/plain; charset=utf-8"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
    origin TEXT PRIMARY KEY,
    size INTEGER NOT NULL,
    root BLOB NOT NULL,
    note TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS history (
    origin TEXT NOT NULL,
    size INTEGER NOT NULL,
    root BLOB NOT NULL,
    cosigned_at INTEGER NOT NULL,
    PRIMARY KEY (origin, size)
);
"""


@dataclass(frozen=True, slots=True)
class AddCheckpointRequest:
    """The body of an ``add-checkpoint`` request.

    Attributes:
        old_size: the size of the checkpoint the client believes the witness holds.
        proof: the consistency proof from ``old_size`` to the checkpoint's size.
        checkpoint: the new signed checkpoint note.
    """

    old_size: int
    proof: tuple[bytes, ...]
    checkpoint: str

    def to_bytes(self) -> bytes:
        """Return the request body (UTF-8)."""
        lines = [f"old {self.old_size}", *(base64.b64encode(h).decode() for h in self.proof)]
        return ("\n".join(lines) + "\n\n" + self.checkpoint).encode("utf-8")

    @classmethod
    def parse(cls, body: bytes) -> AddCheckpointRequest:
        """Parse a request body strictly.

        Raises:
            WitnessError: status 400 for anything malformed (not UTF-8, a bad ``old`` line,
                a proof line that is not the canonical base64 of 32 bytes, more than 63 of
                them, no empty line).
        """
        try:
            text = body.decode("utf-8", "strict")
        except UnicodeDecodeError as exc:
            raise WitnessError("request body is not UTF-8", status=400) from exc
        head, sep, note = text.partition("\n\n")
        if not sep:
            raise WitnessError("request has no empty line before the checkpoint", status=400)
        lines = head.split("\n")
        found = _OLD.match(lines[0])
        if found is None:
            raise WitnessError("request does not start with 'old <size>'", status=400)
        if len(lines) - 1 > MAX_PROOF_LINES:
            raise WitnessError(f"more than {MAX_PROOF_LINES} proof lines", status=400)
        proof: list[bytes] = []
        for line in lines[1:]:
            try:
                raw = base64.b64decode(line, validate=True)
            except (binascii.Error, ValueError) as exc:
                raise WitnessError("a proof line is not base64", status=400) from exc
            if len(raw) != HASH_SIZE or base64.b64encode(raw).decode() != line:
                raise WitnessError("a proof line is not a 32-byte hash", status=400)
            proof.append(raw)
        return cls(int(found.group(1)), tuple(proof), note)


@dataclass(frozen=True, slots=True)
class WitnessResponse:
    """An answer to ``add-checkpoint``.

    Attributes:
        status: the HTTP status.
        content_type: its ``Content-Type``.
        body: its body.
    """

    status: int
    content_type: str
    body: bytes


@dataclass(frozen=True, slots=True)
class WitnessState:
    """What a witness holds for one log.

    Attributes:
        origin: the log's origin.
        size: the size of the latest checkpoint it cosigned.
        root: that checkpoint's 32-byte root.
        note: that checkpoint as submitted (the log's signed note).
    """

    origin: str
    size: int
    root: bytes
    note: str


def _answer(status: int, message: str) -> WitnessResponse:
    return WitnessResponse(status, _TEXT, (message.rstrip("\n") + "\n").encode("utf-8"))


class Witness:
    """A witness for a set of logs, with its state in a SQLite database.

    Thread-safe and process-safe: every request opens its own connection and runs its check
    and update in one ``BEGIN IMMEDIATE`` transaction.
    """

    def __init__(
        self,
        database: str | os.PathLike[str],
        signer: CosignatureSigner,
        logs: Mapping[str, Sequence[Verifier]],
    ) -> None:
        """Create (or reopen) a witness.

        Args:
            database: the SQLite file (created with its tables if missing).
            signer: the witness's cosigning key (type 0x04).
            logs: origin -> the log's verifier keys, for every log this witness serves.

        Raises:
            WitnessError: ``signer`` is not a ``CosignatureSigner``; ``logs`` is not a mapping
                of origin strings to non-empty sequences of verifiers (no log, a log without
                keys, a key that is not a verifier, or a witness's type 0x04 key given as a
                log's key); or the database cannot be opened or is not a witness database
                (the message names the file and SQLite's reason).
            CheckpointError: the signer cannot sign (no ``ed25519`` extra).
        """
        if not isinstance(signer, CosignatureSigner):
            raise WitnessError(
                f"a witness signs with a CosignatureSigner (type 0x04), not {type(signer).__name__}"
            )
        self._logs = _check_logs(logs)
        signer.verifier()  # fails now, not after a state update, without the ed25519 extra
        self._database = Path(database)
        self._signer = signer
        with self._db() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)

    @property
    def name(self) -> str:
        """The witness's key name."""
        return self._signer.name

    @contextlib.contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """A connection, closed after use; SQLite's errors become ``WitnessError`` naming
        the database file."""
        try:
            db = sqlite3.connect(self._database, timeout=60.0, isolation_level=None)
        except sqlite3.Error as exc:
            raise _db_error(self._database, exc) from exc
        try:
            db.execute("PRAGMA synchronous=FULL")
            yield db
        except sqlite3.Error as exc:
            raise _db_error(self._database, exc) from exc
        finally:
            db.close()

    def state(self, origin: str) -> WitnessState | None:
        """The latest checkpoint cosigned for ``origin``, or ``None``.

        Raises:
            WitnessError: the database cannot be read.
        """
        with self._db() as db:
            row = db.execute(
                "SELECT size, root, note FROM checkpoints WHERE origin = ?", (origin,)
            ).fetchone()
        return None if row is None else WitnessState(origin, row[0], bytes(row[1]), row[2])

    def history(self, origin: str) -> list[tuple[int, bytes]]:
        """Every (size, root) this witness cosigned for ``origin``, by size.

        Raises:
            WitnessError: the database cannot be read.
        """
        with self._db() as db:
            rows = db.execute(
                "SELECT size, root FROM history WHERE origin = ? ORDER BY size", (origin,)
            ).fetchall()
        return [(size, bytes(root)) for size, root in rows]

    def add_checkpoint(self, body: bytes) -> WitnessResponse:
        """Handle one ``add-checkpoint`` request body; return the answer (see the module).

        Raises:
            WitnessError: with ``status`` ``None``: the database cannot be read or written
                (the server answers 500). A bad request never raises: it is a 4xx answer.
        """
        try:
            request = AddCheckpointRequest.parse(body)
            parsed = parse_note(request.checkpoint)
            checkpoint = Checkpoint.from_text(parsed.text)
        except WitnessError as exc:
            return _answer(exc.status or 400, str(exc))
        except CheckpointError as exc:
            return _answer(400, f"malformed checkpoint: {exc}")
        keys = self._logs.get(checkpoint.origin)
        if keys is None:
            return _answer(404, f"unknown log {checkpoint.origin!r}")
        try:
            open_note(request.checkpoint, keys)
        except CheckpointError as exc:
            return _answer(403, f"no valid signature by the log: {exc}")
        if request.old_size > checkpoint.size:
            return _answer(
                400, f"old size {request.old_size} is larger than the size {checkpoint.size}"
            )
        with self._db() as db:
            db.execute("BEGIN IMMEDIATE")
            try:
                answer = self._check_and_store(db, request, checkpoint)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            if answer is not None:
                db.execute("ROLLBACK")
                return answer
            db.execute("COMMIT")
        return self._cosign(checkpoint)

    def _check_and_store(
        self, db: sqlite3.Connection, request: AddCheckpointRequest, checkpoint: Checkpoint
    ) -> WitnessResponse | None:
        """Inside the transaction: the checks against the stored state, then the update.
        Returns the refusal, or ``None`` once the new state is written (not yet committed)."""
        row = db.execute(
            "SELECT size, root FROM checkpoints WHERE origin = ?", (checkpoint.origin,)
        ).fetchone()
        held_size, held_root = (0, EMPTY_ROOT) if row is None else (row[0], bytes(row[1]))
        if request.old_size != held_size:
            return WitnessResponse(409, SIZE_CONTENT_TYPE, f"{held_size}\n".encode())
        if request.old_size == checkpoint.size:
            if request.proof:
                return _answer(422, "equal sizes need an empty consistency proof")
            if not hmac.compare_digest(held_root, checkpoint.root):
                if row is None:
                    return _answer(422, "a tree of size 0 has the empty root")
                return _answer(409, f"another root for size {checkpoint.size} was cosigned")
        elif request.old_size == 0:
            if request.proof:
                return _answer(422, "a request from size 0 needs an empty consistency proof")
        else:
            try:
                verify_consistency(
                    request.old_size, checkpoint.size, request.proof, held_root, checkpoint.root
                )
            except ProofError as exc:
                return _answer(422, f"consistency proof does not verify: {exc}")
        db.execute(
            "INSERT INTO checkpoints (origin, size, root, note) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (origin) DO UPDATE SET size = excluded.size, root = excluded.root, "
            "note = excluded.note",
            (checkpoint.origin, checkpoint.size, checkpoint.root, request.checkpoint),
        )
        if checkpoint.size:
            db.execute(
                "INSERT OR IGNORE INTO history (origin, size, root, cosigned_at) "
                "VALUES (?, ?, ?, ?)",
                (checkpoint.origin, checkpoint.size, checkpoint.root, int(time.time())),
            )
        return None

    def _cosign(self, checkpoint: Checkpoint) -> WitnessResponse:
        signed = sign_note(checkpoint.to_text(), [self._signer])
        lines = signed[len(checkpoint.to_text()) + 1 :]
        return WitnessResponse(200, _TEXT, lines.encode("utf-8"))


def _db_error(path: Path, exc: sqlite3.Error) -> WitnessError:
    return WitnessError(f"{path}: witness database error: {exc}")


def _check_logs(logs: object) -> dict[str, tuple[Verifier, ...]]:
    """``logs`` as origin -> the log's verifier keys, checked (see ``Witness.__init__``)."""
    if not isinstance(logs, Mapping):
        raise WitnessError(
            f"a witness's logs map each origin to its verifier keys, not {type(logs).__name__}"
        )
    if not logs:
        raise WitnessError("a witness needs at least one log, each with a verifier key")
    out: dict[str, tuple[Verifier, ...]] = {}
    for origin, keys in logs.items():
        if not isinstance(origin, str) or not origin:
            raise WitnessError(f"a log's origin is a non-empty string, not {origin!r}")
        if isinstance(keys, str | bytes) or not isinstance(keys, Sequence) or not keys:
            raise WitnessError(f"log {origin!r} needs a non-empty sequence of verifier keys")
        for key in keys:
            if isinstance(key, CosignatureVerifier):
                raise WitnessError(
                    f"log {origin!r}: key {key.name!r} is a witness's cosignature key "
                    "(type 0x04), not a log's key"
                )
            if not all(hasattr(key, a) for a in ("name", "key_id", "verify")):
                raise WitnessError(
                    f"log {origin!r}: {type(key).__name__} is not a verifier key "
                    "(signed_note.verifier_from_key makes one)"
                )
        out[origin] = tuple(keys)
    return out


class _Handler(BaseHTTPRequestHandler):
    """``POST <prefix>/add-checkpoint`` to the server's witness; everything else 404."""

    protocol_version = "HTTP/1.1"
    timeout = 60  # seconds a connection may idle or stall mid-request
    server: _Server

    def do_POST(self) -> None:
        if self.path.split("?", 1)[0] != self.server.endpoint:
            self._send(_answer(404, "not found"))
            return
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            self._send(_answer(411, "a Content-Length is required"), close=True)
            return
        length = int(length_text)
        if length > MAX_BODY:
            remaining = length if length <= 8 * MAX_BODY else 0
            while remaining > 0:  # read it away, so that the client sees the answer
                chunk = self.rfile.read(min(remaining, 65536))
                if not chunk:
                    break
                remaining -= len(chunk)
            self._send(_answer(413, "request body too large"), close=True)
            return
        body = self.rfile.read(length)
        try:
            answer = self.server.witness.add_checkpoint(body)
        except (WitnessError, sqlite3.Error, OSError) as exc:
            log.error("witness state error: %s", exc)
            answer = _answer(500, "internal error")
        self._send(answer)

    def do_GET(self) -> None:
        self._send(_answer(404, "not found"))

    def _send(self, answer: WitnessResponse, *, close: bool = False) -> None:
        self.send_response(answer.status)
        self.send_header("Content-Type", answer.content_type)
        self.send_header("Content-Length", str(len(answer.body)))
        if close:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(answer.body)

    def log_message(self, format: str, *args: Any) -> None:
        log.info("%s %s", self.address_string(), format % args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    witness: Witness
    endpoint: str


class WitnessServer:
    """Serves a ``Witness`` over HTTP (stdlib ``http.server``).

    Use ``serve_forever()`` in the foreground, or ``start()`` / ``stop()`` (also a context
    manager) to serve from a background thread.
    """

    def __init__(
        self, witness: Witness, host: str = "127.0.0.1", port: int = 0, prefix: str = ""
    ) -> None:
        """Bind ``host:port`` (port 0: any free port; see ``url``).

        Args:
            witness: the witness to serve.
            host: the address to listen on.
            port: the TCP port.
            prefix: the submission prefix path (``""``: the endpoint is ``/add-checkpoint``).

        Raises:
            WitnessError: ``port`` is not an int in ``0..65535``.
            OSError: the address cannot be bound.
        """
        if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
            raise WitnessError(f"port {port!r} is not in 0..65535")
        self._server = _Server((host, port), _Handler)
        self._server.witness = witness
        self._server.endpoint = "/" + "/".join(
            p for p in (*prefix.strip("/").split("/"), ADD_CHECKPOINT) if p
        )
        self._prefix = prefix.strip("/")
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The submission prefix URL (``http://127.0.0.1:PORT``)."""
        address = self._server.server_address
        host, port = str(address[0]), int(address[1])
        host_text = f"[{host}]" if ":" in host else host
        base = f"http://{host_text}:{port}"
        return f"{base}/{self._prefix}" if self._prefix else base

    def serve_forever(self) -> None:
        """Serve until ``stop`` is called (from another thread) or the process ends."""
        self._server.serve_forever(poll_interval=0.2)

    def start(self) -> WitnessServer:
        """Serve from a daemon thread; return self."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving (from another thread than ``serve_forever``'s) and close the socket."""
        self._server.shutdown()
        self.close()

    def close(self) -> None:
        """Close the listening socket (after ``serve_forever`` returned)."""
        self._server.server_close()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def __enter__(self) -> WitnessServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class WitnessClient:
    """Asks one witness to cosign (the log's side of tlog-witness), over ``urllib``."""

    _PROXYLESS: ClassVar[frozenset[str]] = frozenset({"127.0.0.1", "::1", "localhost"})

    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        """Talk to the witness whose submission prefix is ``url``.

        Args:
            url: the witness's submission prefix, ``http://`` or ``https://``.
            timeout: seconds to wait for the witness, a finite number > 0.

        Raises:
            WitnessError: not an http(s) URL, or a timeout that is not a finite number > 0.
        """
        if (
            not isinstance(timeout, int | float)
            or isinstance(timeout, bool)
            or not math.isfinite(timeout)
            or timeout <= 0
            or timeout > MAX_TIMEOUT
        ):
            raise WitnessError(
                f"timeout {timeout!r} is not a number of seconds in (0, {MAX_TIMEOUT}]"
            )
        if not isinstance(url, str):
            raise WitnessError(f"a witness URL is a string, not {type(url).__name__}")
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise WitnessError(f"a witness URL is http:// or https://, not {url!r}")
        self._endpoint = url.rstrip("/") + "/" + ADD_CHECKPOINT
        self._timeout = timeout
        handlers: list[urllib.request.BaseHandler] = []
        if parts.hostname in self._PROXYLESS:
            handlers.append(urllib.request.ProxyHandler({}))
        self._opener = urllib.request.build_opener(*handlers)

    def add_checkpoint(self, note: str, old_size: int, proof: Sequence[bytes] = ()) -> str:
        """Submit a signed checkpoint; return the witness's cosignature lines.

        Args:
            note: the log's signed checkpoint.
            old_size: the size the witness is believed to hold (0 the first time).
            proof: the consistency proof from ``old_size`` to the checkpoint's size.

        Returns:
            The signature lines of the answer (each ``— <name> <base64>`` and a newline).

        Raises:
            WitnessError: a refusal (``status`` set; for 409, ``size`` is the witness's), no
                answer (``status`` None), or an answer that is not signature lines.
        """
        body = AddCheckpointRequest(old_size, tuple(proof), note).to_bytes()
        request = urllib.request.Request(
            self._endpoint,
            data=body,
            method="POST",
            headers={"Content-Type": _TEXT, "User-Agent": "merkle-memory"},
        )
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                answer: bytes = response.read(MAX_BODY + 1)
        except urllib.error.HTTPError as exc:
            raise _refusal(exc) from exc
        except (urllib.error.URLError, OSError) as exc:
            raise WitnessError(f"{self._endpoint}: no answer ({exc})") from exc
        try:
            text: str = answer.decode("utf-8")
            parse_note("x\n\n" + text)
        except (UnicodeDecodeError, CheckpointError) as exc:
            raise WitnessError(f"{self._endpoint}: the answer is not signature lines") from exc
        return text


def _refusal(exc: urllib.error.HTTPError) -> WitnessError:
    body = exc.read(4096) if exc.fp is not None else b""
    size: int | None = None
    kind = (exc.headers.get("Content-Type") or "").split(";")[0].strip()
    if exc.code == 409 and kind == SIZE_CONTENT_TYPE:
        found = re.fullmatch(rb"(0|[1-9][0-9]{0,18})\n", body)
        if found is not None:
            size = int(found.group(1))
    if kind not in ("text/plain", SIZE_CONTENT_TYPE):  # an HTML error page: not a witness
        return WitnessError(
            f"{exc.url}: HTTP {exc.code} {exc.reason}, answered as {kind or 'no content type'}: "
            "is this a C2SP tlog-witness's submission prefix?",
            status=exc.code,
        )
    detail = body.decode("utf-8", "replace").strip().splitlines()
    reason = detail[0][:200] if detail else exc.reason
    return WitnessError(f"witness refused (HTTP {exc.code}): {reason}", status=exc.code, size=size)
