"""Helpers shared by the test packages: where the checkout, the test assets and ``../shared`` are.

Imported as ``support`` (``tests/`` is on ``sys.path``, see ``pythonpath`` in pyproject.toml).
Known-answer vectors are read from ``tests/assets/`` (copies of ``../shared/vectors``, see its
README.md), so a plain clone runs them; only the real third-party transcripts stay in
``../shared/real_inputs``, and the tests that read them skip when it is absent.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import threading
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from merkle_memory import canonical
from merkle_memory.bank import MemoryBank
from merkle_memory.bank.memory import Memory
from merkle_memory.cli import main
from merkle_memory.rfc6962 import hash_children

REPO = Path(__file__).resolve().parents[1]
ASSETS = REPO / "tests" / "assets"
SHARED = Path(os.environ.get("MERKLE_MEMORY_SHARED", REPO.parent / "shared"))
EXAMPLE_SESSION = REPO / "examples" / "claude_code_session.jsonl"
"""The Claude Code session shipped in ``examples/`` (13 messages, 2 skipped lines, 10 nodes)."""

T0 = datetime(2026, 5, 29, 12, 0, tzinfo=UTC)
"""The timestamp of the memories made by :func:`mem` (plus their ``minutes``)."""


def asset_path(*parts: str) -> Path:
    """Return ``tests/assets/<parts>``; a missing asset fails the calling test (never a skip)."""
    path = ASSETS.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"missing test asset tests/assets/{'/'.join(parts)}", pytrace=False)
    return path


def shared_path(*parts: str) -> Path:
    """Return ``../shared/<parts>``, skipping the calling test when it is absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        where = "/".join(parts)
        pytest.skip(f"needs ../shared/{where} (the project's shared material), absent here")
    return path


# --- command line and transcripts -----------------------------------------------------------


def run_main(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run ``merkle-memory <argv>`` in-process; return (exit code, stdout, stderr)."""
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def nest(levels: int) -> dict[str, Any]:
    """A JSON object ``levels`` deep (``{"k": 1}`` is 1) whose innermost object is ``{"k": 1}``,
    which the projection keeps (so the whole value is hashed)."""
    value: dict[str, Any] = {"k": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def cc_line(uuid: str, parent: str | None, kind: str, content: Any, **extra: Any) -> str:
    """One Claude Code session line (session ``s``) of a ``kind`` ("user"/"assistant") message;
    an assistant message gets the id ``m-<uuid>``; ``extra`` adds top-level fields."""
    message: dict[str, Any] = {"role": kind, "content": content}
    if kind == "assistant":
        message["id"] = "m-" + uuid
    record = {"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s"}
    return json.dumps({**record, "message": message, **extra})


# --- memory bank factories -------------------------------------------------------------------


def mem(content: str, minutes: int = 0, **kw: Any) -> Memory:
    """A small memory at ``T0 + minutes``: a project fact unless ``type``/``scope`` are given;
    other keywords go to :class:`Memory` as they are."""
    kind = kw.pop("type", "fact")
    scope = kw.pop("scope", "project")
    return Memory(kind, scope, content, timestamp=T0 + timedelta(minutes=minutes), **kw)


def ledger_lines(bank: MemoryBank) -> list[dict[str, Any]]:
    """The parsed lines of the bank's ledger."""
    text = bank.ledger_path.read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line]


def ledger_report(**changes: Any) -> dict[str, Any]:
    """The ledger verify dict (``VerifyReport.to_dict()``) of an intact, ok, empty ledger, with
    ``changes`` applied."""
    base: dict[str, Any] = {
        "ok": True,
        "chain": "intact",
        "entries": 0,
        "broken_at": None,
        "reason": None,
        "sealed": 0,
        "altered": [],
        "missing": [],
        "unsealed": [],
        "disputed": [],
    }
    return {**base, **changes}


SEALED_FIELDS = (
    "id",
    "session_id",
    "agent_id",
    "summary",
    "key_facts",
    "decisions_made",
    "projects_referenced",
    "timestamp",
)
"""mnemo-cortex's sealed fields as DESIGN section 4 names them, written out here (not taken
from the library) so that tests pin the library's ``DEFAULT_SEALED_FIELDS``."""


def legacy_file(folder: Path, name: str, legacy_id: str, **fields: Any) -> Path:
    """Write one legacy JSON memory file (no ``status`` key unless given; content = the
    legacy id unless given) and return its path."""
    obj = {
        "id": legacy_id,
        "type": "fact",
        "scope": "project",
        "content": legacy_id,
        "tags": [],
        "timestamp": "2026-01-01T00:00:00Z",
        "links": [],
        **fields,
    }
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(obj), encoding="utf-8")
    return path


def legacy_bank(tmp_path: Path) -> Path:
    """A writable copy of the legacy store ``tests/assets/bank/legacy`` at ``tmp_path/bank``."""
    target = tmp_path / "bank"
    shutil.copytree(asset_path("bank", "legacy"), target)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return target


# --- the order of a writer's file operations (crash-at-every-step tests) ---------------------

_TEMP = re.compile(r"^\.(.+)\.[^.]+\.tmp$")


def file_name(path: Any) -> str:
    """A file's base name, a temp file named after its target (``.x.abc.tmp`` -> ``x~tmp``)."""
    base = os.path.basename(os.fsdecode(path))
    found = _TEMP.match(base)
    return found.group(1) + "~tmp" if found else base


class Recorder:
    """Records ``open``/``write``/``pwrite``/``fsync``/``fdatasync``/``ftruncate``/``replace``/
    ``rename``/``unlink`` calls as ``(op, file name)``, the name of an fd found from its
    ``open`` (or, for a descriptor already open when recording starts, from
    ``/proc/self/fd``); with ``crash_at=k`` the k-th recorded call (0-based) raises
    :class:`Crash` instead of running."""

    OPS = (
        "open",
        "write",
        "pwrite",
        "fsync",
        "fdatasync",
        "ftruncate",
        "replace",
        "rename",
        "unlink",
    )

    def __init__(self, monkeypatch: pytest.MonkeyPatch, crash_at: int | None = None) -> None:
        self.calls: list[tuple[str, str]] = []
        self.fds: dict[int, str] = {}
        for fd in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError):
                self.fds[int(fd)] = file_name(os.readlink(f"/proc/self/fd/{fd}"))
        self.crash_at = crash_at
        self.crashed = False
        for op in self.OPS:
            monkeypatch.setattr(os, op, self._wrap(op, getattr(os, op)))

    def _wrap(self, op: str, real: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if op == "open":
                name = file_name(args[0])
            elif op in ("replace", "rename"):
                name = f"{file_name(args[0])}->{file_name(args[1])}"
            elif op == "unlink":
                name = file_name(args[0])
            else:
                name = self.fds.get(args[0], "?")
            if self.crash_at is not None and not self.crashed and len(self.calls) == self.crash_at:
                self.crashed = True
                raise Crash(f"crash before {op} {name}")
            self.calls.append((op, name))
            result = real(*args, **kwargs)
            if op == "open":
                self.fds[result] = name
            return result

        return call

    def index(self, op: str, name: str, *, last: bool = False) -> int:
        """Position of the first (or last) call ``(op, name)``; fails the test if absent."""
        hits = [i for i, call in enumerate(self.calls) if call == (op, name)]
        assert hits, f"no {op} of {name} in {self.calls}"
        return hits[-1] if last else hits[0]

    def only(self, *names: str) -> list[tuple[str, str]]:
        """The calls on the given file names (or renames involving them), in order."""
        return [c for c in self.calls if any(n in c[1].split("->") for n in names)]


# --- mnemo-cortex's formulas, written naively (research/mnemo.md sections 1 and 2) ----------


def mnemo_canonical(value: Any) -> bytes:
    """The anchor's canonical bytes: ``json.dumps(sort_keys, compact, ensure_ascii=False)``."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def mnemo_verify(tenant: Path) -> dict[str, Any]:
    """A naive re-implementation of mnemo-cortex's ``verify`` (no fast path, no trust split
    beyond the first break): walk ``ledger.jsonl`` with ``json.loads``, recompute each entry
    hash and each record's ``content_sha256`` with the anchor's formulas, and report as the
    anchor does (``{ok, chain, entries, sealed, altered, missing, unsealed}``)."""
    prev, expect, broken, last = "0" * 64, 1, False, {}
    lines = (tenant / "ledger.jsonl").read_text(encoding="utf-8").splitlines()
    entries = 0
    for raw in lines:
        if not raw.strip():
            continue
        entries += 1
        entry = json.loads(raw)
        body = {k: v for k, v in entry.items() if k != "hash"}
        if (
            entry["seq"] != expect
            or entry["prev"] != prev
            or entry["hash"] != hashlib.sha256(mnemo_canonical(body)).hexdigest()
        ):
            broken = True
        expect, prev = entry["seq"] + 1, entry["hash"]
        last[entry["memory_id"]] = entry["content_sha256"]
    on_disk = {}
    for path in sorted((tenant / "memory").glob("*.json")):
        record = json.loads(path.read_text(encoding="utf-8"))
        sealed = {k: record.get(k) for k in SEALED_FIELDS}
        on_disk[record.get("id") or path.stem] = hashlib.sha256(mnemo_canonical(sealed)).hexdigest()
    sealed_n = sum(1 for rid, cs in last.items() if on_disk.get(rid) == cs)
    altered = sorted(rid for rid, cs in last.items() if rid in on_disk and on_disk[rid] != cs)
    missing = sorted(rid for rid in last if rid not in on_disk)
    chain = "broken" if broken else ("intact" if entries else "empty")
    return {
        "ok": chain != "broken" and not altered and not missing,
        "chain": chain,
        "entries": entries,
        "sealed": sealed_n,
        "altered": altered,
        "missing": missing,
        "unsealed": sorted(rid for rid in on_disk if rid not in last),
    }


# --- ledger lines as other programs write them (ledger/test_ledger_find_latest.py and others) -

FOREIGN_FORMS = ("anchor", "escaped", "reordered", "crlf", "canonical-crlf")
"""Valid line forms other than this library's ``canonical`` one (see :func:`entry_line`)."""

_ENTRY_KEYS = ("seq", "ts", "op", "memory_id", "content_sha256", "prev", "hash")


def json_escaped(text: str) -> str:
    """``text`` as a JSON string with every UTF-16 code unit written as ``\\uXXXX``."""
    units = text.encode("utf-16-be", "surrogatepass")
    return (
        '"' + "".join(f"\\u{units[i]:02x}{units[i + 1]:02x}" for i in range(0, len(units), 2)) + '"'
    )


def entry_line(body: dict[str, Any], form: str) -> bytes:
    """One entry line (with its newline) of ``body`` (an entry without ``hash``) in ``form``.

    The hash is the anchor form's (mnemo-cortex's), valid for the chain whatever the form:
    ``canonical`` (RFC 8785, as this library writes), ``anchor`` (mnemo-cortex: insertion
    order, ``", "`` and ``": "``), ``escaped`` (every character of the id as ``\\uXXXX``),
    ``reordered`` (keys in reverse order, compact, non-ASCII escaped), ``crlf`` (the anchor's
    with ``\\r\\n``), ``canonical-crlf``.
    """
    pre = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    entry = dict(body, hash=hashlib.sha256(pre.encode("utf-8", "surrogatepass")).hexdigest())
    if form == "canonical":
        return canonical.dumps(entry) + b"\n"
    if form == "anchor":
        return json.dumps(entry, ensure_ascii=False).encode() + b"\n"
    if form == "escaped":
        text = json.dumps(dict(entry, memory_id="@"), ensure_ascii=True)
        return text.replace('"@"', json_escaped(body["memory_id"])).encode() + b"\n"
    if form == "reordered":
        ordered = {k: entry[k] for k in reversed(_ENTRY_KEYS)}
        return json.dumps(ordered, separators=(",", ":"), ensure_ascii=True).encode() + b"\n"
    if form == "crlf":
        return json.dumps(entry, ensure_ascii=False).encode() + b"\r\n"
    if form == "canonical-crlf":
        return canonical.dumps(entry) + b"\r\n"
    raise AssertionError(form)


def append_entries(
    path: Path,
    plan: list[tuple[str, str]],
    *,
    prev: str = "0" * 64,
    seq: int = 0,
    digests: list[str] | None = None,
    op: str = "save",
) -> str:
    """Append the entries of ``plan`` (``(memory_id, form)``, see :func:`entry_line`) to the
    ledger at ``path``, chained after seq ``seq`` with hash ``prev``; return the last hash.

    Entry ``seq + i + 1`` has ``ts`` 1789851200.5 + its seq, ``op`` ``op``, and
    ``content_sha256`` ``digests[i]`` (default: its seq as 64 hex digits).
    """
    with path.open("ab") as f:
        for index, (memory_id, form) in enumerate(plan):
            seq += 1
            body = {
                "seq": seq,
                "ts": 1_789_851_200.5 + seq,
                "op": op,
                "memory_id": memory_id,
                "content_sha256": f"{seq:064x}" if digests is None else digests[index],
                "prev": prev,
            }
            line = entry_line(body, form)
            prev = json.loads(line)["hash"]
            f.write(line)
    return prev


def fork_child(body: Callable[[], None]) -> Callable[[], None]:
    """Run ``body`` in a child forked from this process now; return ``wait``.

    The child never returns into pytest: it exits 0 when ``body`` returns, 3 when it raises
    (its traceback goes to the parent through a pipe), and 1 with every thread's traceback
    on stderr when it still runs after 30 s (``faulthandler``): a hang fails, never stalls
    the suite. ``wait()`` waits for the child (killing it after 60 s) and fails the test,
    showing the child's traceback, unless it exited 0.
    """
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():  # Python 3.12+: "multi-threaded, use of fork()" is the point
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read_end)
            faulthandler.dump_traceback_later(30, exit=True)
            body()
        except BaseException:
            code = 3
            with contextlib.suppress(BaseException):
                os.write(write_end, traceback.format_exc().encode()[-60_000:])
        finally:
            os._exit(code)
    os.close(write_end)

    def wait() -> None:
        deadline = time.monotonic() + 60
        done, status = os.waitpid(pid, os.WNOHANG)
        while done == 0 and time.monotonic() < deadline:
            time.sleep(0.005)
            done, status = os.waitpid(pid, os.WNOHANG)
        if done == 0:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        with os.fdopen(read_end, "rb") as pipe:
            told = pipe.read().decode(errors="replace")
        assert done != 0, "the child still ran after 60 s (killed)"
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, (
            f"the child ended with status {status:#x}: "
            + (told or "no traceback (after a hang: faulthandler's on stderr)")
        )

    return wait


@contextlib.contextmanager
def held_by_another_thread(enter: Callable[[], AbstractContextManager[Any]]) -> Iterator[None]:
    """For the block, another thread is inside ``enter()`` (a lock, ``paused_collector()``),
    entered before the block starts and left when it ends (the thread joined)."""
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with enter():
            inside.set()
            leave.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert inside.wait(30), "the other thread never got inside"
        yield
    finally:
        leave.set()
        holder.join(30)


class Crash(BaseException):
    """A simulated crash: nothing after it runs (not an Exception, so no handler catches it)."""


# --- naive RFC 6962 reference (section 2.1: MTH and PATH), written plainly ---------------------
# Only MTH is memoized, so the thousands of reference proofs the tests compute stay fast.


def split_size(n: int) -> int:
    """The largest power of two smaller than ``n`` (``n`` > 1; RFC 6962 section 2.1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


@functools.cache
def mth(d: tuple[bytes, ...]) -> bytes:
    """MTH of leaf hashes ``d`` (already ``hash_leaf``ed), by the definition."""
    if len(d) == 1:
        return d[0]
    k = split_size(len(d))
    return hash_children(mth(d[:k]), mth(d[k:]))


def path(m: int, d: tuple[bytes, ...]) -> list[bytes]:
    """PATH(m, D) of RFC 6962 section 2.1.1: the inclusion proof of leaf ``m`` (0-based)."""
    if len(d) == 1:
        return []
    k = split_size(len(d))
    if m < k:
        return [*path(m, d[:k]), mth(d[k:])]
    return [*path(m - k, d[k:]), mth(d[:k])]
