"""PostgreSQL as a ledger store: many tenants' ledgers in one database (private; ``postgres``).

A :class:`PostgresLedgerStore` is one tenant of a database, named by a URL whose fragment is
the tenant: ``postgresql:///agents?host=/run/pg#cc`` (libpq's URI form; ``docs/FORMAT.md``,
"PostgreSQL"). It implements :class:`~merkle_memory.ledger.storage.LedgerStore`, so
:class:`~merkle_memory.ledger.Ledger`, ``verify_ledger``, seal and the proofs run on it
unchanged, and the bytes it serves are exactly the folder store's: one row per line, each
``canonical.dumps(entry) + b"\\n"`` as the folder ledger writes it, at its byte offset.

Tables (component ``ledger`` version 2 in ``mm_schema``; version 1 lacked the last)::

    mm_tenants      (id, name UNIQUE, size, head_seq, head_hash, head_end, head_fingerprint,
                     torn, tree_state)                 -- one row per tenant: its head row
    mm_ledger_lines (tenant_id, start, line)           -- the ledger's bytes, a line a row
    mm_ledger_tree  (tenant_id, pos, hash)             -- the Merkle sidecar (treelog layout)
    mm_records      (tenant_id, name, body)            -- the records: memory/<name> bytes
    mm_append_slots (id = backend pid, tenant_id, ticket, pending, fragments, answer)
                                                       -- the append queue (UNLOGGED)

and, component ``ledger_files`` version 1 (installed by the first write of one)::

    mm_ledger_files (tenant_id, name, body)            -- files beside the ledger:
                                                          ledger.cosigned, ledger.witnesses,
                                                          ledger.recovery-<n>.json

and component ``append_call`` version 1 (installed by the first queued append; PostgreSQL 14
or later): the procedure ``mm_append``, the whole queued append in one call.

An append (``Ledger.append``) is one transaction: it takes the tenant's head row with
``SELECT ... FOR UPDATE``, inserts the entry's line, updates the head row and commits with
``synchronous_commit = on`` before the call returns (the seam's ``LedgerFile.append`` queues
the line; ``write_head`` sends it with the head and the ``COMMIT`` in one round trip). The row
lock is the tenant's lock: a ``locked()`` block holds it from its start to the first head it
writes (so a decision and the append it leads to are atomic, as in ``seal``); work the block
does after that commit (a hook syncing the sidecar, a second append) takes the row again and
re-reads the tenant first, so it is serialized with every other writer and never acts on a
stale view (docs/DECISIONS.md, "The lock of a PostgreSQL tenant"). A writer killed
mid-transaction loses its connection: the server rolls its transaction back and frees the
row. Readers take no lock: each ``reader()`` is one ``REPEATABLE READ`` snapshot, so the
size, the head and the lines it serves are of one instant.

Round trips of one append on that lock path: ``BEGIN`` + the head row + the last 8 KiB of
lines (one pipeline), then lines + head + ``COMMIT`` (one pipeline, one flush of the
write-ahead log); the row is free as soon as the server has flushed the commit.

``Ledger.append`` outside a block takes :meth:`PostgresLedgerStore.append_queued` instead: one
call of the procedure ``mm_append``, prepared once per connection (binary parameters), a
group commit in the database. When nobody holds the tenant's queue lock (an advisory lock),
it takes it and commits the entries at once; otherwise the entries go into the session's
slot of ``mm_append_slots`` (committed inside the procedure without a flush: an unlogged
row), then the call waits for the queue lock; whoever holds it sequences every pending slot
of the tenant under the head row ``FOR UPDATE`` and commits them with one synchronous commit,
and each waiter returns once it reads its seq, visible only after that flush. Where the
procedure cannot be installed, the same steps run as version 2's two statements in one
pipeline. A tenant not as an append left it, or a rollback, sends the append down the lock
path (docs/DECISIONS.md, "The lock of a PostgreSQL tenant").
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import secrets
import select
import struct
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from .. import _pg
from .._json import HEX64
from ..errors import DatabaseError, IndexOutOfRangeError, LedgerError
from ..rfc6962 import EMPTY_ROOT, HASH_SIZE, CompactRange
from ._entry import GENESIS, Entry, build_entries, build_one, usual_stamp
from .storage import SIDE_FILE_NAME, Head, LedgerFile, LedgerStore, check_side_file_name
from .treelog import (
    TreeLogCheck,
    _group,
    _node_chunks,
    leaves_for_node_count,
    node_count,
    node_position,
)

__all__ = ["SCHEMA_VERSION", "PostgresLedgerStore", "TableSidecar"]

log = logging.getLogger("merkle_memory.ledger")

SCHEMA_VERSION: Final = 2
_TENANT: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # = tenant.TENANT_NAME
_SCHEMA_LOCK: Final = _pg.INSTALLER_LOCK  # one installer of any of the package's tables
_WINDOW: Final = 8192  # bytes of the ledger's end read with the head row
_INSERT_LINE: Final = "INSERT INTO mm_ledger_lines (tenant_id, start, line) VALUES (%s, %s, %s)"
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS mm_schema (component text PRIMARY KEY, version integer NOT NULL)",
    """CREATE TABLE IF NOT EXISTS mm_tenants (
        id               integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        name             text COLLATE "C" NOT NULL UNIQUE,
        size             bigint NOT NULL DEFAULT 0,
        head_seq         bigint,
        head_hash        text,
        head_end         bigint,
        head_fingerprint text,
        torn             bytea NOT NULL DEFAULT '',
        tree_state       bytea
    )""",
    """CREATE TABLE IF NOT EXISTS mm_ledger_lines (
        tenant_id integer NOT NULL REFERENCES mm_tenants (id),
        start     bigint NOT NULL,
        line      bytea NOT NULL,
        PRIMARY KEY (tenant_id, start)
    )""",
    """CREATE TABLE IF NOT EXISTS mm_ledger_tree (
        tenant_id integer NOT NULL REFERENCES mm_tenants (id),
        pos       bigint NOT NULL,
        hash      bytea NOT NULL,
        PRIMARY KEY (tenant_id, pos)
    )""",
    """CREATE TABLE IF NOT EXISTS mm_records (
        tenant_id integer NOT NULL REFERENCES mm_tenants (id),
        name      text COLLATE "C" NOT NULL,
        body      bytea NOT NULL,
        PRIMARY KEY (tenant_id, name)
    )""",
    "INSERT INTO mm_schema VALUES ('ledger', 1) ON CONFLICT (component) DO NOTHING",
)
# Version 2 (additive, docs/FORMAT.md section 12): the append queue and the procedure that
# drains it. Installed over version 1 in one transaction; nothing of version 1 changes.
_SCHEMA_2: Final = (
    # One slot per session (its backend pid), rewritten in place by each of its appends
    # (HOT updates: no row or index entry per append), unlogged (no write-ahead log, so
    # queuing commits without a flush; emptied by a crash, when no waiter is left).
    """CREATE UNLOGGED TABLE IF NOT EXISTS mm_append_slots (
        id          integer PRIMARY KEY,
        tenant_id   integer NOT NULL,
        ticket      bigint NOT NULL,
        pending     boolean NOT NULL,
        queued_at   timestamptz NOT NULL,
        known_seq   bigint NOT NULL,
        known_hash  text,
        heads       bytea[] NOT NULL,
        bodies      bytea[] NOT NULL,
        tails       bytea[] NOT NULL,
        record_name text COLLATE "C",
        record_body bytea,
        first_seq   bigint,
        first_prev  text,
        last_hash   text,
        last_end    bigint
    ) WITH (fillfactor = 30)""",
    "CREATE INDEX IF NOT EXISTS mm_append_slots_tenant ON mm_append_slots (tenant_id)",
    r"""CREATE OR REPLACE FUNCTION mm_append_lead(
        tenant integer, me bigint, own_known_seq bigint, own_known_hash text,
        own_heads bytea[], own_bodies bytea[], own_tails bytea[], own_record_name text,
        own_record_body bytea, OUT first_seq bigint, OUT first_prev text,
        OUT last_hash text, OUT last_end bigint, OUT batch integer)
    LANGUAGE plpgsql AS $fn$
    DECLARE
        t record;
        q record;
        seq bigint;
        prev text;
        pos bigint;
        middle bytea;
        digest text;
        line bytea;
        i integer;
        refused boolean := false;
        starts bigint[] := '{}';
        lines bytea[] := '{}';
        done_ids integer[] := '{}';
        done_tickets bigint[] := '{}';
        done_seqs bigint[] := '{}';
        done_prevs text[] := '{}';
        done_hashes text[] := '{}';
        done_ends bigint[] := '{}';
    BEGIN
        -- Called holding the tenant's queue lock: sequence every pending slot of the tenant
        -- (and the caller's own entries, when given here rather than in its slot) in one
        -- transaction, which the caller's synchronous commit ends.
        batch := 0;
        SELECT size, head_seq, head_hash, head_end, head_fingerprint INTO t
            FROM mm_tenants WHERE id = tenant FOR UPDATE;
        IF t.size IS NULL
           OR NOT coalesce((t.head_seq IS NULL AND t.size = 0)
                           OR (t.head_seq IS NOT NULL AND t.head_hash IS NOT NULL
                               AND t.head_end = t.size
                               AND t.head_fingerprint = 'postgresql:' || tenant::text),
                           false) THEN
            UPDATE mm_append_slots SET pending = false
                WHERE id = pg_backend_pid() AND ticket = me;
            first_seq := 0;  -- not as an append left it: the caller takes the lock itself
            RETURN;
        END IF;
        seq := coalesce(t.head_seq, 0);
        prev := coalesce(t.head_hash, repeat('0', 64));
        pos := t.size;
        FOR q IN SELECT a.id, a.ticket, a.known_seq, a.known_hash, a.heads, a.bodies,
                        a.tails, a.record_name, a.record_body, a.queued_at AS turn
                   FROM mm_append_slots a
                  WHERE a.tenant_id = tenant AND a.pending
                 UNION ALL
                 SELECT pg_backend_pid(), me, own_known_seq, own_known_hash, own_heads,
                        own_bodies, own_tails, own_record_name, own_record_body,
                        'infinity'::timestamptz
                  WHERE own_heads IS NOT NULL
                 ORDER BY turn, id LOOP
            IF q.known_seq > seq OR (q.known_seq = seq AND seq > 0
                                     AND q.known_hash IS DISTINCT FROM prev) THEN
                -- its writer acknowledged more than the head holds (a rollback), or
                -- another entry at that seq: its own lock path refuses it
                IF q.ticket = me THEN
                    refused := true;
                    UPDATE mm_append_slots SET pending = false
                        WHERE id = pg_backend_pid() AND ticket = me;
                END IF;
                CONTINUE;
            END IF;
            IF q.ticket = me THEN
                first_seq := seq + 1;
                first_prev := prev;
            ELSE
                done_ids := done_ids || q.id;
                done_tickets := done_tickets || q.ticket;
                done_seqs := done_seqs || (seq + 1);
                done_prevs := done_prevs || prev;
            END IF;
            FOR i IN 1 .. cardinality(q.heads) LOOP
                seq := seq + 1;
                middle := q.bodies[i] || convert_to(prev || '","seq":' || seq::text, 'UTF8')
                    || q.tails[i];
                digest := encode(sha256(q.heads[i] || middle), 'hex');
                line := q.heads[i] || convert_to('"hash":"' || digest || '",', 'UTF8')
                    || middle || decode('0a', 'hex');
                starts := starts || pos;
                lines := lines || line;
                pos := pos + length(line);
                prev := digest;
            END LOOP;
            IF q.ticket = me THEN
                last_hash := prev;
                last_end := pos;
            ELSE
                done_hashes := done_hashes || prev;
                done_ends := done_ends || pos;
            END IF;
            batch := batch + 1;
            IF q.record_name IS NOT NULL THEN
                INSERT INTO mm_records (tenant_id, name, body)
                    VALUES (tenant, q.record_name, q.record_body)
                    ON CONFLICT (tenant_id, name) DO UPDATE SET body = excluded.body;
            END IF;
        END LOOP;
        IF batch > 0 THEN
            INSERT INTO mm_ledger_lines (tenant_id, start, line)
                SELECT tenant, u.s, u.l FROM unnest(starts, lines) AS u(s, l);
            UPDATE mm_tenants SET size = pos, head_seq = seq, head_hash = prev,
                head_end = pos, head_fingerprint = 'postgresql:' || tenant::text
                WHERE id = tenant;
        END IF;
        IF cardinality(done_ids) > 0 THEN
            UPDATE mm_append_slots a SET pending = false, first_seq = u.s, first_prev = u.p,
                last_hash = u.h, last_end = u.e
                FROM unnest(done_ids, done_tickets, done_seqs, done_prevs, done_hashes,
                            done_ends) AS u(i, k, s, p, h, e)
                WHERE a.id = u.i AND a.ticket = u.k;
        END IF;
        IF refused THEN
            first_seq := 0;
        ELSIF first_seq IS NULL THEN
            RAISE EXCEPTION 'queued entry % of tenant % not found', me, tenant;
        ELSIF own_heads IS NULL THEN
            UPDATE mm_append_slots SET pending = false WHERE id = pg_backend_pid();
        END IF;
        IF seq / 4096 <> coalesce(t.head_seq, 0) / 4096 THEN
            -- now and then: forget the idle slots of sessions that are gone
            DELETE FROM mm_append_slots a WHERE a.tenant_id = tenant AND NOT a.pending
                AND NOT EXISTS (SELECT FROM pg_stat_activity s WHERE s.pid = a.id);
        END IF;
    END
    $fn$""",
    r"""CREATE OR REPLACE FUNCTION mm_append_wait(
        tenant integer, me bigint, OUT first_seq bigint, OUT first_prev text,
        OUT last_hash text, OUT last_end bigint, OUT batch integer)
    LANGUAGE plpgsql AS $fn$
    BEGIN
        -- The tenant's queue lock, one caller at a time (released when this transaction
        -- ends, after its commit is flushed): a caller finds its entries sequenced, or leads.
        PERFORM pg_advisory_xact_lock(1835859971, tenant);
        SELECT a.first_seq, a.first_prev, a.last_hash, a.last_end
            INTO first_seq, first_prev, last_hash, last_end
            FROM mm_append_slots a
            WHERE a.id = pg_backend_pid() AND a.ticket = me AND NOT a.pending;
        IF FOUND THEN
            batch := 0;  -- a leader's commit holds them: visible only once flushed
            RETURN;
        END IF;
        SELECT * INTO first_seq, first_prev, last_hash, last_end, batch
            FROM mm_append_lead(tenant, me, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    END
    $fn$""",
    r"""CREATE OR REPLACE FUNCTION mm_append_now(
        tenant integer, me bigint, known_seq bigint, known_hash text, heads bytea[],
        bodies bytea[], tails bytea[], record_name text, record_body bytea,
        OUT first_seq bigint, OUT first_prev text, OUT last_hash text, OUT last_end bigint,
        OUT batch integer)
    LANGUAGE plpgsql AS $fn$
    BEGIN
        -- Nobody leads: take the queue lock at once and lead, or report -1 (busy).
        IF NOT pg_try_advisory_xact_lock(1835859971, tenant) THEN
            first_seq := -1;
            batch := 0;
            RETURN;
        END IF;
        SELECT * INTO first_seq, first_prev, last_hash, last_end, batch
            FROM mm_append_lead(tenant, me, known_seq, known_hash, heads, bodies, tails,
                                record_name, record_body);
    END
    $fn$""",
    "UPDATE mm_schema SET version = 2 WHERE component = 'ledger' AND version = 1",
)
# Component ``ledger_files`` version 1 (additive, docs/FORMAT.md section 12): the files kept
# beside a ledger (``ledger.cosigned``, ``ledger.witnesses``, ``ledger.recovery-<n>.json``),
# installed by the first write of one; a database without it reads as tenants without any.
_FILES_COMPONENT: Final = "ledger_files"
_FILES_VERSION: Final = 1
_FILES_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS mm_ledger_files (
        tenant_id integer NOT NULL REFERENCES mm_tenants (id),
        name      text COLLATE "C" NOT NULL,
        body      bytea NOT NULL,
        PRIMARY KEY (tenant_id, name)
    )""",
    "INSERT INTO mm_schema VALUES ('ledger_files', 1) ON CONFLICT (component) DO NOTHING",
)
# Component ``append_call`` version 1 (additive; needs PostgreSQL 14 or later, for a
# procedure's OUT parameters): the whole queued append as one procedure, so a caller makes
# one call, the server sends one reply and the caller wakes once. Installed by the first
# queued append of a library that knows it; where it cannot be (an older server, a role
# that may not create routines), appends keep the two statements of version 2.
_CALL_COMPONENT: Final = "append_call"
# Connection strings on which this process failed to install it (warned once; not retried).
_CALL_REFUSED: Final[set[str]] = set()
_CALL_VERSION: Final = 1
_CALL_SCHEMA: Final = (
    r"""CREATE OR REPLACE PROCEDURE mm_append(
        tenant integer, me bigint, own_known_seq bigint, own_known_hash text,
        own_heads bytea[], own_bodies bytea[], own_tails bytea[], own_record_name text,
        own_record_body bytea, OUT first_seq bigint, OUT first_prev text,
        OUT last_hash text, OUT last_end bigint, OUT batch integer)
    LANGUAGE plpgsql AS $fn$
    DECLARE
        t record;
        seq bigint;
        prev text;
        pos bigint;
        middle bytea;
        digest text;
        line bytea;
        i integer;
        starts bigint[] := '{}';
        lines bytea[] := '{}';
    BEGIN
        -- mm_append_now, then mm_append_queue and mm_append_wait, in one call (the two
        -- functions' bodies inline: a nested call measured dearer): lead at once when
        -- nobody holds the tenant's queue lock; otherwise commit this session's slot
        -- (unlogged: no flush), wait for the lock, and find the entries sequenced, or lead.
        IF pg_try_advisory_xact_lock(1835859971, tenant) THEN
            IF NOT EXISTS (SELECT FROM mm_append_slots a
                            WHERE a.tenant_id = tenant AND a.pending) THEN
                -- Alone (no slot pending: a writer on its own tenant, the usual case):
                -- mm_append_lead's steps for the caller's entries only, without its
                -- queue scan, its bookkeeping for other slots and the call (a fifth of
                -- the server's CPU per append with a tenant per writer). Same checks,
                -- same lines, same head.
                SELECT size, head_seq, head_hash, head_end, head_fingerprint INTO t
                    FROM mm_tenants WHERE id = tenant FOR UPDATE;
                batch := 0;
                IF t.size IS NULL
                   OR NOT coalesce((t.head_seq IS NULL AND t.size = 0)
                                   OR (t.head_seq IS NOT NULL AND t.head_hash IS NOT NULL
                                       AND t.head_end = t.size
                                       AND t.head_fingerprint = 'postgresql:' || tenant::text),
                                   false) THEN
                    first_seq := 0;  -- not as an append left it: the lock path
                    RETURN;
                END IF;
                seq := coalesce(t.head_seq, 0);
                prev := coalesce(t.head_hash, repeat('0', 64));
                pos := t.size;
                IF own_known_seq > seq OR (own_known_seq = seq AND seq > 0
                                           AND own_known_hash IS DISTINCT FROM prev) THEN
                    first_seq := 0;  -- a rollback, or another entry at that seq
                    RETURN;
                END IF;
                first_seq := seq + 1;
                first_prev := prev;
                FOR i IN 1 .. cardinality(own_heads) LOOP
                    seq := seq + 1;
                    middle := own_bodies[i]
                        || convert_to(prev || '","seq":' || seq::text, 'UTF8') || own_tails[i];
                    digest := encode(sha256(own_heads[i] || middle), 'hex');
                    line := own_heads[i] || convert_to('"hash":"' || digest || '",', 'UTF8')
                        || middle || decode('0a', 'hex');
                    starts := starts || pos;
                    lines := lines || line;
                    pos := pos + length(line);
                    prev := digest;
                END LOOP;
                last_hash := prev;
                last_end := pos;
                batch := 1;
                IF own_record_name IS NOT NULL THEN
                    INSERT INTO mm_records (tenant_id, name, body)
                        VALUES (tenant, own_record_name, own_record_body)
                        ON CONFLICT (tenant_id, name) DO UPDATE SET body = excluded.body;
                END IF;
                INSERT INTO mm_ledger_lines (tenant_id, start, line)
                    SELECT tenant, u.s, u.l FROM unnest(starts, lines) AS u(s, l);
                UPDATE mm_tenants SET size = pos, head_seq = seq, head_hash = prev,
                    head_end = pos, head_fingerprint = 'postgresql:' || tenant::text
                    WHERE id = tenant;
                IF seq / 4096 <> coalesce(t.head_seq, 0) / 4096 THEN
                    DELETE FROM mm_append_slots a WHERE a.tenant_id = tenant AND NOT a.pending
                        AND NOT EXISTS (SELECT FROM pg_stat_activity s WHERE s.pid = a.id);
                END IF;
                RETURN;
            END IF;
            SELECT * INTO first_seq, first_prev, last_hash, last_end, batch
                FROM mm_append_lead(tenant, me, own_known_seq, own_known_hash, own_heads,
                                    own_bodies, own_tails, own_record_name, own_record_body);
            RETURN;
        END IF;
        INSERT INTO mm_append_slots AS a (id, tenant_id, ticket, pending, queued_at,
            known_seq, known_hash, heads, bodies, tails, record_name, record_body)
        VALUES (pg_backend_pid(), tenant, me, true, clock_timestamp(), own_known_seq,
            own_known_hash, own_heads, own_bodies, own_tails, own_record_name,
            own_record_body)
        ON CONFLICT (id) DO UPDATE SET tenant_id = excluded.tenant_id,
            ticket = excluded.ticket, pending = true, queued_at = excluded.queued_at,
            known_seq = excluded.known_seq, known_hash = excluded.known_hash,
            heads = excluded.heads, bodies = excluded.bodies, tails = excluded.tails,
            record_name = excluded.record_name, record_body = excluded.record_body,
            first_seq = NULL, first_prev = NULL, last_hash = NULL, last_end = NULL;
        COMMIT;
        PERFORM pg_advisory_xact_lock(1835859971, tenant);
        SELECT a.first_seq, a.first_prev, a.last_hash, a.last_end
            INTO first_seq, first_prev, last_hash, last_end
            FROM mm_append_slots a
            WHERE a.id = pg_backend_pid() AND a.ticket = me AND NOT a.pending;
        IF FOUND THEN
            batch := 0;  -- a leader's commit holds them: visible only once flushed
            RETURN;
        END IF;
        SELECT * INTO first_seq, first_prev, last_hash, last_end, batch
            FROM mm_append_lead(tenant, me, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
    END
    $fn$""",
    "INSERT INTO mm_schema VALUES ('append_call', 1) ON CONFLICT (component) DO NOTHING",
)
_UPSERT_FILE: Final = (
    "INSERT INTO mm_ledger_files (tenant_id, name, body) VALUES (%s, %s, %s)"
    " ON CONFLICT (tenant_id, name) DO UPDATE SET body = excluded.body"
)
_HEAD_COLUMNS: Final = "size, head_seq, head_hash, head_end, head_fingerprint"
_READ_RANGE: Final = (
    "SELECT start, line FROM mm_ledger_lines WHERE tenant_id = %(t)s AND start >= COALESCE("
    "(SELECT max(start) FROM mm_ledger_lines WHERE tenant_id = %(t)s AND start <= %(o)s), 0)"
    " AND start < %(e)s ORDER BY start"
)

_T = TypeVar("_T")


def fragments(lines: bytes) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """Cut entry lines (``build_entries``' output) into what the server needs to rebuild
    them at any seq after any prev: ``(heads, bodies, tails)``, one of each per line.

    A line is ``head + '"hash":"' + HASH + '",' + body + PREV + '","seq":' + SEQ + tail +
    "\\n"`` (RFC 8785 key order), and its hash is ``sha256(head + body + PREV + '","seq":'
    + SEQ + tail)``: ``head`` is ``{"content_sha256":"...",``, ``body`` runs from
    ``"memory_id"`` to ``"prev":"`` (the id already in its RFC 8785 form), ``tail`` is
    ``,"ts":...}``.
    """
    heads: list[bytes] = []
    bodies: list[bytes] = []
    tails: list[bytes] = []
    for line in lines.split(b"\n")[:-1]:
        cut = line.index(b'"hash":"')
        rest = line[cut + 74 :]  # after '"hash":"' + 64 hex digits + '",'
        prev = rest.rindex(b'"prev":"') + 8  # the last: only numbers follow it
        seq = rest.index(b",", prev + 72)  # after PREV + '","seq":' + SEQ
        heads.append(line[:cut])
        bodies.append(rest[:prev])
        tails.append(rest[seq:])
    return heads, bodies, tails


def fragment_one(
    memory_id: str, content_sha256: str, op: str, ts_text: str
) -> tuple[list[bytes], list[bytes], list[bytes]]:
    """``fragments`` of the one usual entry (``_entry.usual_stamp`` accepted its arguments
    and gave ``ts_text``), formatted directly: no line built, nothing hashed."""
    return (
        [f'{{"content_sha256":"{content_sha256}",'.encode()],
        [f'"memory_id":"{memory_id}","op":"{op}","prev":"'.encode()],
        [f',"ts":{ts_text}}}'.encode()],
    )


_SLOT_COLUMNS: Final = (
    "$1::integer, $2::bigint, $3::bigint, $4::text, $5::bytea[], $6::bytea[], $7::bytea[],"
    " $8::text, $9::bytea"
)
# Prepared once per connection (binary parameters: no parsing, planning or hex per append).
_PREPARED: Final = {
    b"mm_append_now": f"SELECT * FROM mm_append_now({_SLOT_COLUMNS})".encode(),
    b"mm_append_queue": (
        b"INSERT INTO mm_append_slots AS a (id, tenant_id, ticket, pending, queued_at, known_seq,"
        b" known_hash, heads, bodies, tails, record_name, record_body) VALUES"
        b" (pg_backend_pid(), $1::integer, $2::bigint, true, clock_timestamp(), $3::bigint,"
        b" $4::text, $5::bytea[], $6::bytea[], $7::bytea[], $8::text, $9::bytea)"
        b" ON CONFLICT (id) DO UPDATE SET tenant_id = excluded.tenant_id,"
        b" ticket = excluded.ticket, pending = true, queued_at = excluded.queued_at,"
        b" known_seq = excluded.known_seq, known_hash = excluded.known_hash,"
        b" heads = excluded.heads, bodies = excluded.bodies, tails = excluded.tails,"
        b" record_name = excluded.record_name, record_body = excluded.record_body,"
        b" first_seq = NULL, first_prev = NULL, last_hash = NULL, last_end = NULL"
    ),
    b"mm_append_wait": b"SELECT * FROM mm_append_wait($1::integer, $2::bigint)",
}
# Component append_call: the procedure's five OUT parameters are passed as NULL (its row).
_CALL: Final = (
    b"mm_append",
    f"CALL mm_append({_SLOT_COLUMNS}, NULL, NULL, NULL, NULL, NULL)".encode(),
)
# Generic plans for every statement of the store's sessions: the functions of the append
# queue run the same few statements on every call, and PostgreSQL kept re-planning them
# (custom plans, since a generic plan guesses 100 elements for ``unnest`` of an array
# parameter and looked dearer): about a sixth of the server's CPU per append.
_SESSION: Final = (("plan_cache_mode", "force_generic_plan"),)
_BINARY: Final = {2: [1] * 2, 9: [1] * 9}  # every parameter in binary format
_BYTEA_OID: Final = 17
_ARRAY_HEADER: Final = struct.Struct("!iiIii")
_LENGTH: Final = struct.Struct("!i")
_INT4: Final = struct.Struct("!i")
_INT8: Final = struct.Struct("!q")
_ONE_ITEM: Final = _ARRAY_HEADER.pack(1, 0, _BYTEA_OID, 1, 1)


def _bytea_array(items: list[bytes]) -> bytes:
    """``items`` as a one-dimensional ``bytea[]`` in PostgreSQL's binary array format."""
    pack = _LENGTH.pack
    if len(items) == 1:  # an append of one entry: the usual case
        return _ONE_ITEM + pack(len(items[0])) + items[0]
    return _ARRAY_HEADER.pack(1, 0, _BYTEA_OID, len(items), 1) + b"".join(
        pack(len(item)) + item for item in items
    )


def _slot_params(
    tenant: int,
    me: int,
    known: Head | None,
    fragments: tuple[list[bytes], list[bytes], list[bytes]],
    record: tuple[str, bytes] | None,
) -> list[bytes | None]:
    """The nine binary parameters of ``mm_append_now`` and ``mm_append_queue``."""
    known_hash = None
    if known is not None and HEX64.fullmatch(known.hash):
        known_hash = known.hash.encode()
    heads, bodies, tails = fragments
    return [
        _INT4.pack(tenant),
        _INT8.pack(me),
        _INT8.pack(int(known.seq) if known is not None else 0),
        known_hash,
        _bytea_array(heads),
        _bytea_array(bodies),
        _bytea_array(tails),
        None if record is None else record[0].encode(),
        None if record is None else record[1],
    ]


_COMMAND_OK: Final = 1  # libpq's PGRES_COMMAND_OK
_PIPELINE_SYNC: Final = 10  # libpq's PGRES_PIPELINE_SYNC
_SQLSTATE: Final = ord("C")  # PG_DIAG_SQLSTATE


def _prepare(pg: Any, *, call: bool) -> None:
    """Prepare every statement of ``_PREPARED`` on the libpq connection ``pg``, and with
    ``call`` the procedure's ``_CALL`` too (one already prepared there, ``42P05``, is
    kept)."""
    for name, sql in (*_PREPARED.items(), _CALL) if call else _PREPARED.items():
        result = pg.prepare(name, sql)
        if result.status != _COMMAND_OK and result.error_field(_SQLSTATE) != b"42P05":
            raise _pg.driver().errors.error_from_result(result)


def _wait(pg: Any, *, write: bool = False) -> None:
    """Block (without the interpreter's lock) until ``pg``'s socket is readable, or writable
    with ``write``."""
    sock = pg.socket
    if write:
        select.select([sock], [sock], [])
    else:
        select.select([sock], [], [])


def _next_result(pg: Any) -> Any:
    """``pg``'s next result (``None`` at the end of a statement's), waited for through
    ``select``: without the interpreter's lock (psycopg runs ``PQgetResult`` holding it) and
    interruptible (libpq's own wait resumes after a signal, so Ctrl-C would go unheard)."""
    while pg.is_busy():
        _wait(pg)
        pg.consume_input()
    return pg.get_result()


def _pipeline(conn: Any, calls: list[tuple[bytes, list[bytes | None]]]) -> list[Any]:
    """Run the prepared calls in one round trip (several: one pipeline, each call followed
    by a sync point, so each is its own transaction); give each call's result (a refused
    call's error, and ``PGRES_PIPELINE_ABORTED`` for the calls after it).

    Any failure or interruption while a call runs (``KeyboardInterrupt`` during a wait for
    the queue lock or the head row, say) closes the connection (its state is unknown; the
    pool drops it). The call is not cancelled on the server: its session goes on as a killed
    writer's does, so an entry it already queued is committed as soon as the lock frees, in
    queue order, not left pending for whichever leader comes next, at any later time."""
    pg = conn.pgconn
    results: list[Any] = []
    try:
        if len(calls) == 1:  # one statement: sent alone, outside pipeline mode
            name, params = calls[0]
            pg.send_query_prepared(name, params, _BINARY[len(params)])
        else:
            pg.enter_pipeline_mode()
            for name, params in calls:
                pg.send_query_prepared(name, params, _BINARY[len(params)])
                pg.pipeline_sync()
        while pg.flush():
            _wait(pg, write=True)
            pg.consume_input()
        if len(calls) == 1:
            results.append(_next_result(pg))
            while _next_result(pg) is not None:  # the statement's end
                pass
            return results
        for _ in calls:
            result = None
            while True:
                got = _next_result(pg)
                if got is None:
                    continue
                if got.status == _PIPELINE_SYNC:
                    break
                result = got
            results.append(result)
        pg.exit_pipeline_mode()
    except BaseException:
        with contextlib.suppress(Exception):
            conn.close()  # state unknown: the pool drops a closed connection
        raise
    return results


def split_lines(data: bytes) -> list[bytes]:
    """``data`` cut after each newline (the pieces concatenate back to ``data``)."""
    pieces = data.split(b"\n")
    lines = [piece + b"\n" for piece in pieces[:-1]]
    if pieces[-1]:
        lines.append(pieces[-1])
    return lines


def schema_version(conn: Any, component: str) -> int | None:
    """The installed version of ``component`` in ``mm_schema``, or ``None`` when absent."""
    if conn.execute("SELECT to_regclass('mm_schema')").fetchone()[0] is None:
        return None
    found = conn.execute(
        "SELECT version FROM mm_schema WHERE component = %s", (component,)
    ).fetchone()
    return None if found is None else int(found[0])


def install_component(conn: Any, component: str, statements: Sequence[str]) -> None:
    """Run ``statements`` (which record ``component`` in ``mm_schema``) unless another
    installer did meanwhile: under the installers' advisory lock, in the caller's open
    transaction (it commits or rolls back with it).

    Raises:
        psycopg.Error: the server refused a statement (the caller decides).
    """
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
    if schema_version(conn, component) is None:
        for statement in statements:
            conn.execute(statement)


def _first_line(exc: BaseException) -> str:
    """The first line of a driver error's message, for a one-line warning."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass(slots=True)
class _Context:
    """One thread's ``locked()`` or ``reader()`` block: its connection and what it knows."""

    conn: Any
    tenant_id: int
    write: bool
    snapshot: bool = False  # a reader's REPEATABLE READ transaction
    tx_open: bool = False
    pending: list[tuple[str, Any]] = field(default_factory=list)
    lines: list[tuple[int, bytes]] = field(default_factory=list)
    size_dirty: bool = False  # lines queued: the tenant row's size must follow
    size: int = 0
    head: Head | None = None
    window_start: int = 0
    window: bytearray = field(default_factory=bytearray)


class _File(LedgerFile):
    """The bytes of one tenant's ledger, for one block of :class:`PostgresLedgerStore`."""

    __slots__ = ("_ctx", "_store", "_writable")

    def __init__(self, store: PostgresLedgerStore, ctx: _Context, writable: bool) -> None:
        self._store, self._ctx, self._writable = store, ctx, writable

    def size(self) -> int:
        self._store._relock(self._ctx)
        return self._ctx.size

    def read(self, offset: int, length: int) -> bytes:
        ctx = self._ctx
        self._store._relock(ctx)
        stop = min(offset + length, ctx.size)
        if offset >= stop:
            return b""
        if offset >= ctx.window_start:
            return bytes(ctx.window[offset - ctx.window_start : stop - ctx.window_start])
        return self._store._guard("read", lambda: self._read_rows(offset, stop))

    def _read_rows(self, offset: int, stop: int) -> bytes:
        ctx = self._ctx
        rows = ctx.conn.execute(_READ_RANGE, {"t": ctx.tenant_id, "o": offset, "e": stop})
        data = b""
        first = None
        for start, line in rows:
            if first is None:
                first = int(start)
            data += bytes(line)
        if first is None:
            return b""
        return data[offset - first : stop - first]

    def fingerprint(self) -> str:
        """``postgresql:<tenant id>``: the database is trusted to change only through this
        library (docs/THREAT_MODEL.md), so an append trusts the chain up to its head."""
        return f"postgresql:{self._ctx.tenant_id}"

    def stamp(self, *, settled: bool) -> str | None:
        """:meth:`fingerprint` (the lines change only by appends, which change the size)."""
        return self.fingerprint()

    def _refuse_read_only(self) -> None:
        if not self._writable:
            raise LedgerError(f"{self._store.label}: cannot write under a read-only lock")

    def append(self, offset: int, data: bytes) -> None:
        """Queue ``data`` (cut into lines) for the transaction the next ``write_head`` commits.

        Raises:
            LedgerError: read-only, or ``offset`` is not the ledger's end.
        """
        self._refuse_read_only()
        ctx = self._ctx
        if offset != ctx.size:
            raise LedgerError(f"{self._store.label}: append at {offset}, but the end is {ctx.size}")
        self._store._begin(ctx)
        for line in split_lines(data):
            ctx.lines.append((offset, line))
            offset += len(line)
        ctx.window += data
        ctx.size = offset
        ctx.size_dirty = True

    def quarantine(self, offset: int, fragment: bytes) -> None:
        """Keep ``fragment`` in the tenant's ``torn`` column (after a header line) and cut
        the ledger back to ``offset``, in the block's transaction: both commit together with
        its next head (or at the end of the block), so no byte is ever lost and no other
        writer sees the ledger in between."""
        self._refuse_read_only()
        ctx = self._ctx
        log.warning(
            "Ledger %s: quarantining a torn tail (%d bytes at offset %d)",
            self._store.label,
            len(fragment),
            offset,
        )
        header = f"# quarantined {time.time():.3f} from offset {offset}\n".encode()
        self._store._begin(ctx)
        args = {"t": ctx.tenant_id, "o": offset}

        def cut() -> None:
            with ctx.conn.pipeline():
                self._store._flush(ctx)
                ctx.conn.execute(
                    "DELETE FROM mm_ledger_lines WHERE tenant_id = %(t)s AND start >= %(o)s", args
                )
                ctx.conn.execute(
                    "UPDATE mm_ledger_lines"
                    " SET line = substring(line from 1 for (%(o)s - start)::integer)"
                    " WHERE tenant_id = %(t)s AND start < %(o)s"
                    " AND start + length(line) > %(o)s",
                    args,
                )
                ctx.conn.execute(
                    "UPDATE mm_tenants SET torn = torn || %s, size = %s WHERE id = %s",
                    (header + fragment + b"\n", offset, ctx.tenant_id),
                )

        self._store._guard("quarantine a torn tail", cut)
        if offset >= ctx.window_start:
            del ctx.window[offset - ctx.window_start :]
        else:
            ctx.window_start, ctx.window = offset, bytearray()
        ctx.size = offset

    @contextlib.contextmanager
    def shared_lock(self) -> Iterator[None]:
        """Nothing to take: a reader's snapshot never sees a half-written append."""
        yield


_COPY_ROWS = 256
"""Above this many new sidecar rows, ``append_sidecar`` uses ``COPY`` rather than INSERTs."""


class TableSidecar:
    """The Merkle sidecar of one tenant in ``mm_ledger_tree``: every RFC 6962 perfect-subtree
    hash at its ``treelog`` position (``node_position``), so a proof reads O(log n) rows."""

    def __init__(self, store: PostgresLedgerStore) -> None:
        self._store = store

    def _count(self) -> int:
        def work(conn: Any, tenant: int) -> int:
            found = conn.execute(
                "SELECT max(pos) FROM mm_ledger_tree WHERE tenant_id = %s", (tenant,)
            ).fetchone()[0]
            return 0 if found is None else int(found) + 1

        return self._store.with_connection("read the sidecar", work, default=0)

    def __len__(self) -> int:
        return leaves_for_node_count(self._count())

    def _hashes(self, positions: Sequence[int]) -> list[bytes]:
        def work(conn: Any, tenant: int) -> list[bytes]:
            rows = conn.execute(
                "SELECT pos, hash FROM mm_ledger_tree WHERE tenant_id = %s AND pos = ANY(%s)",
                (tenant, list(positions)),
            ).fetchall()
            found = {int(pos): bytes(value) for pos, value in rows}
            return [found[p] for p in positions if p in found]

        none: list[bytes] = []
        hashes = self._store.with_connection("read the sidecar", work, default=none)
        if len(hashes) != len(positions):
            raise LedgerError(f"{self._store.label}: the sidecar is shorter than it was")
        return hashes

    def __getitem__(self, index: int, /) -> bytes:
        if not 0 <= index < len(self):
            raise IndexError(f"leaf {index} is not in the sidecar")
        return self._hashes([node_count(index)])[0]

    def perfect_root(self, level: int, index: int) -> bytes:
        """The root of the ``2**level`` leaves starting at leaf ``index * 2**level``: one
        row (``proof.SubtreeSource``), so a proof reads O(log n) rows, not every leaf of its
        subtrees. A subtree's row is stored once its last leaf is (``treelog`` order).

        Raises:
            IndexOutOfRangeError: that subtree is not complete in the sidecar.
            DatabaseError: a driver failure.
        """
        if level < 0 or index < 0:
            raise IndexOutOfRangeError(f"perfect subtree ({level}, {index}) is not complete")
        try:
            return self._hashes([node_position(level, index)])[0]
        except LedgerError:
            raise IndexOutOfRangeError(
                f"perfect subtree ({level}, {index}) is not complete"
            ) from None

    def compact_range(self, size: int) -> CompactRange:
        """The compact range of the first ``size`` leaves (one query)."""
        positions: list[int] = []
        start = 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                positions.append(node_count(start) + (2 << level) - 2)
                start += 1 << level
        return CompactRange(size, self._hashes(positions)) if size else CompactRange()

    def root(self, size: int | None = None) -> bytes:
        """The RFC 6962 root of the first ``size`` leaves (all by default)."""
        size = len(self) if size is None else size
        if not 0 <= size <= len(self):
            raise IndexError(f"tree size {size} is not in 0..{len(self)}")
        return self.compact_range(size).root() if size else EMPTY_ROOT

    def check(self, leaf_data: Iterable[bytes]) -> TreeLogCheck:
        """Compare every stored hash with the ones recomputed from ``leaf_data`` (O(n))."""
        stored = len(self)
        expected = 0
        first_bad: int | None = None
        position = 0
        for chunk, leaves in _node_chunks(leaf_data):
            expected = leaves
            count = len(chunk) // HASH_SIZE
            if first_bad is None and count:
                have = self._range(position, position + count)
                if have != chunk:
                    bad = next(
                        (i for i in range(0, len(chunk), HASH_SIZE)
                         if have[i : i + HASH_SIZE] != chunk[i : i + HASH_SIZE]),
                        len(chunk),
                    )  # fmt: skip
                    first_bad = leaves_for_node_count(position + bad // HASH_SIZE)
            position += count
        if first_bad is None and stored != expected:
            first_bad = expected
        return TreeLogCheck(first_bad is None, expected, stored, first_bad)

    def nodes(self, first: int, stop: int) -> bytes:
        """The stored hashes at ``treelog`` positions ``first..stop-1`` (``node_position``),
        concatenated, in one query (fewer at the end of the table); for a reader that needs
        every hash of a range, such as a tiles publisher."""
        return self._range(first, stop)

    def _range(self, first: int, stop: int) -> bytes:
        def work(conn: Any, tenant: int) -> bytes:
            rows = conn.execute(
                "SELECT hash FROM mm_ledger_tree WHERE tenant_id = %s AND pos >= %s AND pos < %s"
                " ORDER BY pos",
                (tenant, first, stop),
            )
            return b"".join(bytes(row[0]) for row in rows)

        return self._store.with_connection("read the sidecar", work, default=b"")


class PostgresLedgerStore(LedgerStore):
    """One tenant's ledger in a PostgreSQL database (see the module docstring).

    Args:
        url: ``postgresql://...#tenant`` (libpq's URI form; the fragment names the tenant).
        tenant: the tenant name, when ``url`` has no fragment.

    Raises:
        LedgerError: no tenant is named, or the name is not
            ``[A-Za-z0-9][A-Za-z0-9_-]{0,63}``.
        DatabaseError: ``url`` is not a PostgreSQL URL.

    Nothing is connected until first use. One object is shared by every thread of a process
    (each block borrows a connection of its own from a small pool); every driver failure is
    raised as :class:`~merkle_memory.errors.DatabaseError`.
    """

    def __init__(self, url: str, tenant: str | None = None) -> None:
        conninfo, fragment = _pg.split_url(url)
        name = tenant if tenant is not None else fragment
        if not isinstance(name, str) or not _TENANT.fullmatch(name):
            raise LedgerError(
                f"a ledger URL names its tenant after '#' ([A-Za-z0-9][A-Za-z0-9_-]{{0,63}}):"
                f" {_pg.redact(url)!r:.120}"
            )
        self.tenant = name
        self.url = f"{conninfo}#{name}"
        self._label = f"{_pg.redact(conninfo)}#{name}"
        self._pool = _pg.Pool(conninfo, settings=_SESSION)
        self._tenant_id: int | None = None
        self._schema_ready = False
        self._queue_ready = False  # schema version 2: mm_append_queue and its functions
        self._contended = False  # the last queued append found another caller leading
        # Tickets of this store's queued calls (a random start: a reused backend pid never
        # meets an old slot's ticket); itertools.count is atomic under the interpreter lock.
        self._tickets = itertools.count(secrets.randbits(62))
        self._prepared_on: weakref.WeakSet[Any] = weakref.WeakSet()
        self._warm: Any = None  # the connection _run_prepared last prepared on or used
        self._call_checked = False  # component append_call looked for (installed if absent)
        self._call_ready = False  # ... and found at the version this library calls
        self._upgrade_refused = False  # installing version 2 over version 1 failed once
        self._files_ready = False  # component ledger_files is installed (committed)
        self._local = threading.local()

    @classmethod
    def existing(cls, url: str) -> PostgresLedgerStore:
        """The store of ``url``'s tenant, which must exist (for commands that only read it).

        Raises:
            LedgerError: the URL names no tenant of the database (``<URL>: no tenant 'NAME'
                in the database``), or is not a ledger URL.
            DatabaseError: the database cannot be reached.
        """
        store = cls(url)
        if not store.exists():
            raise LedgerError(f"{store.label}: no tenant {store.tenant!r} in the database")
        return store

    def __repr__(self) -> str:
        return f"PostgresLedgerStore({self._label!r})"

    @property
    def label(self) -> str:
        """The URL without its password, ``#tenant`` included."""
        return self._label

    # --- connections, errors and the tenant row --------------------------------------------

    def _guard(self, doing: str, work: Callable[[], _T]) -> _T:
        """Run ``work``; a driver failure becomes ``DatabaseError``."""
        psycopg = _pg.driver()
        try:
            return work()
        except psycopg.Error as exc:
            raise _pg.translate(exc, self._pool.conninfo, doing) from None

    def _context(self) -> _Context | None:
        ctx: _Context | None = getattr(self._local, "ctx", None)
        return ctx

    def with_connection(self, doing: str, work: Callable[[Any, int], _T], *, default: _T) -> _T:
        """Run ``work(connection, tenant id)`` for the tables beside the ledger (records).

        Inside this thread's ``locked()`` or ``reader()`` block the block's connection is
        used (so the work is part of its transaction or snapshot); otherwise a pooled one
        in autocommit mode.

        Args:
            doing: what the work does, for the error message.
            work: called with a psycopg connection and the tenant's row id.
            default: returned when the tenant (or the schema) does not exist.

        Raises:
            DatabaseError: a driver failure.
        """
        ctx = self._context()
        if ctx is not None:
            self._relock(ctx)
            return self._guard(doing, lambda: work(ctx.conn, ctx.tenant_id))

        def pooled() -> _T:
            with self._pool.connection() as conn:
                tenant = self._lookup(conn, create=False)
                return default if tenant is None else work(conn, tenant)

        return self._guard(doing, pooled)

    def _lookup(self, conn: Any, *, create: bool) -> int | None:
        """The tenant's id (cached), creating the schema and the tenant row if ``create``."""
        if not self._schema_ready or (
            create and not self._queue_ready and not self._upgrade_refused
        ):
            version = schema_version(conn, "ledger")
            if version is None and not create:
                return None
            if version not in (None, 1, SCHEMA_VERSION):
                raise DatabaseError(
                    f"{self._label}: ledger schema version {version}, this library reads"
                    f" versions 1 to {SCHEMA_VERSION}",
                    _pg.redact(self._pool.conninfo),
                )
            if version is None or (version == 1 and create):
                try:
                    with conn.transaction():
                        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                        found = schema_version(conn, "ledger")  # another installer's, maybe
                        if found != SCHEMA_VERSION:
                            for statement in (_SCHEMA if found is None else ()) + _SCHEMA_2:
                                conn.execute(statement)
                    version = SCHEMA_VERSION
                except _pg.driver().Error as exc:
                    if version is None:
                        raise
                    # e.g. a role that may write the tables but not create functions: the
                    # database stays at version 1 and appends take the lock path
                    self._upgrade_refused = True
                    log.warning(
                        "Ledger %s: cannot install schema version %d (%s); appends take the"
                        " lock path",
                        self._label,
                        SCHEMA_VERSION,
                        _first_line(exc),
                    )
            self._queue_ready = version == SCHEMA_VERSION
            self._schema_ready = True
        if self._tenant_id is not None:
            return self._tenant_id
        select = "SELECT id FROM mm_tenants WHERE name = %s"
        row = conn.execute(select, (self.tenant,)).fetchone()
        if row is None and create:
            conn.execute(
                "INSERT INTO mm_tenants (name) VALUES (%s) ON CONFLICT (name) DO NOTHING",
                (self.tenant,),
            )
            row = conn.execute(select, (self.tenant,)).fetchone()
        if row is None:
            return None
        self._tenant_id = int(row[0])
        return self._tenant_id

    def _check_call(self, conn: Any) -> None:
        """Look for component ``append_call`` (the procedure ``mm_append``) and install it
        when absent, under the installers' advisory lock. Where it cannot be installed (a
        server older than PostgreSQL 14, a role that may not create routines) or another
        version is installed, appends keep version 2's two statements (a failed install is
        logged once per process and connection string, and not tried again by the
        process's later stores of it).

        Raises:
            psycopg.Error: the database cannot be read, or the connection failed during the
                install (``OperationalError``: nothing is decided, the next append looks
                again); the caller translates it.
        """
        if self._pool.conninfo in _CALL_REFUSED:  # this process tried and warned already
            self._call_ready, self._call_checked = False, True
            return
        version = schema_version(conn, _CALL_COMPONENT)
        if version is None:
            try:
                with conn.transaction():
                    install_component(conn, _CALL_COMPONENT, _CALL_SCHEMA)
                version = schema_version(conn, _CALL_COMPONENT)
            except _pg.driver().OperationalError:
                raise  # the connection or the server failed: the next append looks again
            except _pg.driver().Error as exc:
                _CALL_REFUSED.add(self._pool.conninfo)
                log.warning(
                    "Ledger %s: cannot install %s (%s); appends take two statements",
                    self._label,
                    _CALL_COMPONENT,
                    _first_line(exc),
                )
        self._call_ready = version == _CALL_VERSION
        self._call_checked = True

    def _load(self, ctx: _Context, head_row: Any, window: Iterable[Any]) -> None:
        """Fill ``ctx`` from the tenant row and the window rows read with it."""
        size, seq, hash_, end, fingerprint = head_row
        ctx.size = int(size)
        ctx.head = None if seq is None else Head(int(seq), str(hash_), end, fingerprint)
        rows = [(int(start), bytes(line)) for start, line in window]
        ctx.window_start = rows[0][0] if rows else ctx.size
        ctx.window = bytearray(b"".join(line for _, line in rows))
        if ctx.window_start + len(ctx.window) != ctx.size:
            raise DatabaseError(
                f"{self._label}: the stored lines end at byte"
                f" {ctx.window_start + len(ctx.window)}, the tenant row says {ctx.size}",
                _pg.redact(self._pool.conninfo),
            )

    def _head_queries(self, ctx: _Context, *, lock_row: bool) -> tuple[Any, Any]:
        """Queue the tenant row (``FOR UPDATE`` if ``lock_row``) and the window rows."""
        lock = " FOR UPDATE" if lock_row else ""
        head = ctx.conn.execute(
            f"SELECT {_HEAD_COLUMNS} FROM mm_tenants WHERE id = %s{lock}", (ctx.tenant_id,)
        )
        window = ctx.conn.execute(
            "SELECT start, line FROM mm_ledger_lines WHERE tenant_id = %(t)s AND start >= COALESCE("
            "(SELECT max(start) FROM mm_ledger_lines WHERE tenant_id = %(t)s AND start <="
            " (SELECT size FROM mm_tenants WHERE id = %(t)s) - %(w)s), 0) ORDER BY start",
            {"t": ctx.tenant_id, "w": _WINDOW},
        )
        return head, window

    def _relock(self, ctx: _Context) -> None:
        """In a ``locked()`` block whose transaction a head committed: take the row again."""
        if not ctx.snapshot and not ctx.tx_open:
            self._begin(ctx)

    def _begin(self, ctx: _Context) -> None:
        """Open the block's write transaction if none is open: ``BEGIN`` and the tenant's
        head row ``FOR UPDATE`` (the state is re-read: another writer may have committed)."""
        if ctx.tx_open:
            return

        def begin() -> None:
            with ctx.conn.pipeline():
                ctx.conn.execute("BEGIN")
                head, window = self._head_queries(ctx, lock_row=True)
            ctx.tx_open = True
            self._load(ctx, head.fetchone(), window.fetchall())

        self._guard("lock the tenant's head row", begin)

    def _flush(self, ctx: _Context, head: Head | None = None) -> None:
        """Send the queued lines and statements, then the tenant row's size (and ``head``),
        inside a pipeline of the caller's."""
        if ctx.lines:
            with ctx.conn.cursor() as cursor:
                cursor.executemany(
                    _INSERT_LINE, [(ctx.tenant_id, start, line) for start, line in ctx.lines]
                )
        for sql, args in ctx.pending:
            ctx.conn.execute(sql, args)
        if head is not None:
            ctx.conn.execute(
                "UPDATE mm_tenants SET size = %s, head_seq = %s, head_hash = %s,"
                " head_end = %s, head_fingerprint = %s WHERE id = %s",
                (ctx.size, head.seq, head.hash, head.end, head.fingerprint, ctx.tenant_id),
            )
        elif ctx.size_dirty:
            ctx.conn.execute(
                "UPDATE mm_tenants SET size = %s WHERE id = %s", (ctx.size, ctx.tenant_id)
            )
        ctx.lines, ctx.pending, ctx.size_dirty = [], [], False

    def stage(self, sql: str, args: Any) -> None:
        """Queue a statement for the current write transaction of this thread (committed with
        the next head, or at the end of the block; rolled back with it on an error).

        Raises:
            LedgerError: the calling thread holds no write lock of this store.
        """
        ctx = self._context()
        if ctx is None or not ctx.write:
            raise LedgerError(f"{self._label}: stage() outside a locked(write=True) block")
        self._begin(ctx)
        ctx.pending.append((sql, args))

    def tenant_id(self, *, create: bool = False) -> int | None:
        """The tenant's row id (``None`` when it does not exist and ``create`` is false)."""
        ctx = self._context()
        if ctx is not None:
            return ctx.tenant_id

        def work() -> int | None:
            with self._pool.connection() as conn:
                return self._lookup(conn, create=create)

        return self._guard("find the tenant", work)

    # --- the seam --------------------------------------------------------------------------

    def exists(self) -> bool:
        """Whether the tenant has a row (an empty ledger counts)."""
        return self.tenant_id() is not None

    @contextlib.contextmanager
    def locked(self, *, write: bool) -> Iterator[LedgerFile]:
        """See :meth:`LedgerStore.locked`: a transaction holding the tenant's head row
        ``FOR UPDATE`` (taken again, after a head was committed, by any later use).

        With ``write=False`` the bytes lent are read-only, but the row is still locked (the
        proofs maintain the sidecar under this lock), which needs ``UPDATE`` on
        ``mm_tenants``. Leaving the block commits what it staged; an exception rolls back
        everything since the last head.

        Raises:
            FileNotFoundError: ``write=False`` and the tenant does not exist.
            DatabaseError: the database cannot be reached or refuses.
            LedgerError: a block of this store is already open in this thread.
        """
        if self._context() is not None:
            raise LedgerError(f"{self._label}: the lock is not re-entrant (use Ledger.locked)")
        with self._pool.connection() as conn:
            tenant = self._guard("find the tenant", lambda: self._lookup(conn, create=write))
            if tenant is None:
                raise FileNotFoundError(f"no tenant {self.tenant!r} in {self._label}")
            ctx = _Context(conn, tenant, write)
            self._begin(ctx)
            self._local.ctx = ctx
            try:
                yield _File(self, ctx, write)
            except BaseException:
                self._local.ctx = None
                self._release(ctx, commit=False)
                raise
            self._local.ctx = None
            self._release(ctx, commit=True)

    def _release(self, ctx: _Context, *, commit: bool) -> None:
        """End the block: commit (or roll back) the transaction if one is open."""
        if not ctx.tx_open:
            return

        def release() -> None:
            with ctx.conn.pipeline():
                if commit:
                    self._flush(ctx)
                    ctx.conn.execute("COMMIT")
                else:
                    ctx.conn.execute("ROLLBACK")
            ctx.tx_open = False
            ctx.lines, ctx.pending, ctx.size_dirty = [], [], False

        try:
            self._guard("end the transaction", release)
        except DatabaseError:
            with contextlib.suppress(Exception):
                ctx.conn.close()  # the server rolls back a closed session's transaction
            if commit:
                raise

    @contextlib.contextmanager
    def reader(self) -> Iterator[LedgerFile | None]:
        """See :meth:`LedgerStore.reader`: one ``REPEATABLE READ`` snapshot (inside this
        thread's own ``locked()`` block: that block's view, its lock held)."""
        held = self._context()
        if held is not None:
            yield _File(self, held, False)
            return
        with self._pool.connection() as conn:
            tenant = self._guard("find the tenant", lambda: self._lookup(conn, create=False))
            if tenant is None:
                yield None
                return
            ctx = _Context(conn, tenant, False, snapshot=True)

            def begin() -> None:
                with conn.pipeline():
                    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    head, window = self._head_queries(ctx, lock_row=False)
                self._load(ctx, head.fetchone(), window.fetchall())

            self._guard("read the ledger", begin)
            self._local.ctx = ctx
            try:
                yield _File(self, ctx, False)
            finally:
                self._local.ctx = None
                self._guard("end the snapshot", lambda: conn.execute("COMMIT"))

    def read_head(self) -> Head | None:
        """See :meth:`LedgerStore.read_head`: the head columns of the tenant row."""
        ctx = self._context()
        if ctx is not None:
            self._relock(ctx)
            return ctx.head

        def work(conn: Any, tenant: int) -> Head | None:
            row = conn.execute(
                f"SELECT {_HEAD_COLUMNS} FROM mm_tenants WHERE id = %s", (tenant,)
            ).fetchone()
            _size, seq, hash_, end, fingerprint = row
            return None if seq is None else Head(int(seq), str(hash_), end, fingerprint)

        return self.with_connection("read the head", work, default=None)

    def write_head(self, head: Head) -> None:
        """See :meth:`LedgerStore.write_head`: the queued lines, the staged statements and
        the head row in one transaction, committed (WAL flushed) before this returns.

        Raises:
            LedgerError: outside a ``locked(write=True)`` block of this thread.
            DatabaseError: the database refused (nothing of the transaction is kept).
        """
        ctx = self._context()
        if ctx is None or not ctx.write:
            raise LedgerError(f"{self._label}: write_head outside a locked(write=True) block")
        self._begin(ctx)

        def commit() -> None:
            try:
                with ctx.conn.pipeline():
                    self._flush(ctx, head)
                    ctx.conn.execute("COMMIT")
            finally:
                ctx.tx_open = ctx.conn.info.transaction_status != 0
                ctx.lines, ctx.pending, ctx.size_dirty = [], [], False

        self._guard("commit the append", commit)
        ctx.head = head

    def _run_prepared(
        self, conn: Any, calls: list[tuple[bytes, list[bytes | None]]]
    ) -> list[bytes | None]:
        """Run statements of ``_PREPARED`` (binary parameters, each its own transaction) in
        one round trip, a pipeline when there are several; give the first row of the last
        one's result.

        The statements are prepared on a connection's first use (and again if something
        dropped them, e.g. ``DEALLOCATE ALL``: a statement refused for that is run again, and
        only from that statement on, so an entry is never queued twice). Waits for the
        server through ``select``, so other threads run meanwhile (libpq's blocking
        ``PQgetResult``, as psycopg calls it, would hold the interpreter's lock).

        Raises:
            psycopg.Error: the server refused a statement (the caller translates it); any
                failure inside the pipeline closes the connection (the pool drops it).
        """
        for _attempt in range(2):
            if conn is not self._warm and conn not in self._prepared_on:
                _prepare(conn.pgconn, call=self._call_ready)
                self._prepared_on.add(conn)
            self._warm = conn  # the last connection used, prepared (spares the set's lookup)
            results = _pipeline(conn, calls)
            for n, result in enumerate(results):
                if result.status in (_COMMAND_OK, _pg.TUPLES_OK):
                    continue
                if result.error_field(_SQLSTATE) == b"26000" and not _attempt:
                    self._prepared_on.discard(conn)  # dropped meanwhile: prepare, run again
                    self._warm = None
                    calls = calls[n:]
                    break
                raise _pg.driver().errors.error_from_result(result)
            else:
                last = results[-1]
                return [last.get_value(0, k) for k in range(5)]
        raise AssertionError("unreachable: a second refusal raises")

    def append_queued(
        self,
        pairs: Sequence[tuple[str, str]],
        op: str,
        ts: float,
        known: Head | None,
        record: tuple[str, bytes] | None = None,
    ) -> tuple[list[Entry], int] | None:
        """See :meth:`LedgerStore.append_queued`: one round trip, a group commit in the
        database (docs/DECISIONS.md, "The lock of a PostgreSQL tenant").

        One call of the procedure ``mm_append`` (component ``append_call``, installed by the
        first call; where it cannot be, ``mm_append_now``, or ``mm_append_queue`` then
        ``mm_append_wait`` in one pipeline, do the same in two statements). When no caller
        holds the tenant's queue lock, it takes it and commits the entries at once (with any
        queued ones). Otherwise the entries go into this session's slot of
        ``mm_append_slots`` (committed at once, unlogged: no flush) and the call waits for
        the queue lock: whoever holds it sequences every pending
        slot of the tenant in queue order under the head row ``FOR UPDATE`` (the lines built
        from the fragments made here and hashed by the server's ``sha256``, the records
        upserted), writes the lines and the head and commits with ``synchronous_commit =
        on``; a caller returns once it reads its seq, visible only after that flush.

        Args:
            pairs: ``(memory_id, content_sha256)`` pairs, appended in this order.
            op: ``"save"``, ``"adopt"`` or ``"forget"``.
            ts: epoch seconds (rounded to microseconds, as ``Entry.create``).
            known: the head this caller last acknowledged (a head row behind it, or a
                different hash at its seq, is a rollback: the caller's lock path refuses it).
            record: ``(name, bytes)`` of an ``mm_records`` row to upsert in the same
                transaction (a save), or ``None``.

        Returns:
            ``(entries, end)``: the entries, acknowledged, and the byte offset after the last
            one; ``None`` when the caller must take the lock itself (inside a ``locked()``
            block of this thread, a database of schema version 1 opened read-only, or a
            tenant not as an append left it: a head behind its lines, a rollback).

        Raises:
            LedgerFormatError: a bad pair or ``op`` (nothing is queued).
            DatabaseError: the database refused or cannot be reached (nothing of the call is
                acknowledged; entries queued before a lost connection may still be committed
                by another caller's commit, as a crash after ``COMMIT`` would leave them).
        """
        if self._context() is not None or not pairs:
            return None
        usual = usual_stamp(*pairs[0], op, ts) if len(pairs) == 1 else None
        if usual is not None:  # one usual entry: its fragments formatted directly
            cut = fragment_one(*pairs[0], op, usual[1])
        else:
            _made, data = build_entries(list(pairs), op, ts, 0, GENESIS)  # checks every pair
            cut = fragments(data)
        me = next(self._tickets)
        pool, psycopg = self._pool, _pg.driver()
        # The call inline (no closure, no context manager): this is every append's path.
        try:
            conn = pool.take()
            healthy = False
            try:
                tenant = self._lookup(conn, create=True)
                if tenant is None or not self._queue_ready:
                    row = None
                else:
                    if not self._call_checked:
                        self._check_call(conn)
                    params = _slot_params(tenant, me, known, cut, record)
                    row = None
                    if self._call_ready:  # one call, one reply
                        row = self._run_prepared(conn, [(_CALL[0], params)])
                    elif not self._contended:
                        row = self._run_prepared(conn, [(b"mm_append_now", params)])
                        if row[0] == b"-1":
                            row = None
                            self._contended = True  # another caller leads: queue from now on
                    if row is None:
                        row = self._run_prepared(
                            conn, [(b"mm_append_queue", params), (b"mm_append_wait", params[:2])]
                        )
                        # led alone: nobody else was waiting; take the lock at once next time
                        self._contended = row[4] != b"1"
                healthy = True
            finally:
                pool.give(conn, healthy=healthy)
        except psycopg.Error as exc:
            raise _pg.translate(exc, pool.conninfo, "commit the append") from None
        if row is None or row[0] is None or row[0] == b"0":
            return None
        first_seq, first_prev = int(row[0]), bytes(row[1] or b"").decode()
        last_hash, last_end = bytes(row[2] or b"").decode(), int(row[3] or b"")
        built = None
        if usual is not None and HEX64.fullmatch(first_prev):
            built = build_one(*pairs[0], op, ts, first_seq - 1, first_prev, usual)
        if built is not None:
            entries = [built[0]]
        else:
            entries, _lines = build_entries(list(pairs), op, ts, first_seq - 1, first_prev)
        if entries[-1].hash != last_hash:
            raise DatabaseError(
                f"{self._label}: the database built entry {entries[-1].seq} with hash"
                f" {last_hash}, this library builds {entries[-1].hash}",
                _pg.redact(pool.conninfo),
            )
        return entries, last_end

    # --- the Merkle sidecar (derived data) --------------------------------------------------

    def sidecar(self) -> TableSidecar:
        """See :meth:`LedgerStore.sidecar`: the tenant's rows of ``mm_ledger_tree``."""
        return TableSidecar(self)

    def append_sidecar(self, leaf_hashes: Sequence[bytes]) -> None:
        """See :meth:`LedgerStore.append_sidecar`: the new node hashes as rows."""
        tree = self.sidecar()
        size = len(tree)
        compact = tree.compact_range(size)
        first = node_count(size)
        blob = b"".join(_group(h, size + i, compact) for i, h in enumerate(leaf_hashes))
        rows = [
            (first + i, blob[i * HASH_SIZE : (i + 1) * HASH_SIZE])
            for i in range(len(blob) // HASH_SIZE)
        ]

        def work(conn: Any, tenant: int) -> None:
            with conn.cursor() as cursor:
                cursor.execute(
                    "DELETE FROM mm_ledger_tree WHERE tenant_id = %s AND pos >= %s",
                    (tenant, first),
                )
                if len(rows) <= _COPY_ROWS:
                    cursor.executemany(
                        "INSERT INTO mm_ledger_tree (tenant_id, pos, hash) VALUES (%s, %s, %s)",
                        [(tenant, pos, value) for pos, value in rows],
                    )
                    return
                # many rows (a first sync of a large tenant): COPY is ~20x faster than INSERTs
                with cursor.copy("COPY mm_ledger_tree (tenant_id, pos, hash) FROM STDIN") as copy:
                    for pos, value in rows:
                        copy.write_row((tenant, pos, value))

        self.with_connection("append to the sidecar", work, default=None)

    def truncate_sidecar(self, leaves: int) -> None:
        """See :meth:`LedgerStore.truncate_sidecar`."""
        self._delete_tree(node_count(leaves))

    def clear_sidecar(self) -> None:
        """See :meth:`LedgerStore.clear_sidecar`."""
        self._delete_tree(0)

    def _delete_tree(self, first: int) -> None:
        def work(conn: Any, tenant: int) -> None:
            conn.execute(
                "DELETE FROM mm_ledger_tree WHERE tenant_id = %s AND pos >= %s", (tenant, first)
            )

        self.with_connection("cut the sidecar", work, default=None)

    def read_sidecar_state(self) -> bytes | None:
        """See :meth:`LedgerStore.read_sidecar_state`: the tenant row's ``tree_state``."""

        def work(conn: Any, tenant: int) -> bytes | None:
            value = conn.execute(
                "SELECT tree_state FROM mm_tenants WHERE id = %s", (tenant,)
            ).fetchone()[0]
            return None if value is None else bytes(value)

        return self.with_connection("read the sidecar state", work, default=None)

    def write_sidecar_state(self, data: bytes) -> None:
        """See :meth:`LedgerStore.write_sidecar_state`."""

        def work(conn: Any, tenant: int) -> None:
            conn.execute("UPDATE mm_tenants SET tree_state = %s WHERE id = %s", (data, tenant))

        self.with_connection("write the sidecar state", work, default=None)

    # --- the files beside the ledger (component ledger_files) ---------------------------

    def remove_head(self) -> None:
        """See :meth:`LedgerStore.remove_head`: the head columns of the tenant row set to
        NULL in the block's transaction (committed at its end, rolled back with it).

        Raises:
            LedgerError: outside a ``locked(write=True)`` block of this thread.
        """
        ctx = self._context()
        if ctx is None or not ctx.write:
            raise LedgerError(f"{self._label}: remove_head outside a locked(write=True) block")
        self._begin(ctx)
        ctx.pending.append(
            (
                "UPDATE mm_tenants SET head_seq = NULL, head_hash = NULL, head_end = NULL,"
                " head_fingerprint = NULL WHERE id = %s",
                (ctx.tenant_id,),
            )
        )
        ctx.head = None

    def _files_table(self, conn: Any, *, create: bool) -> bool:
        """Whether ``mm_ledger_files`` is installed; with ``create``, install it when it is
        not (under the installers' advisory lock; in the caller's open transaction when
        there is one, so it commits or rolls back with it).

        Raises:
            DatabaseError: another version of the component is installed.
        """
        if self._files_ready:
            return True
        version = schema_version(conn, _FILES_COMPONENT)
        if version is None and create:
            in_block = conn.info.transaction_status != 0  # not idle: a block's transaction

            if in_block:
                install_component(conn, _FILES_COMPONENT, _FILES_SCHEMA)
                return True  # not cached: the block may still roll it back
            with conn.transaction():
                install_component(conn, _FILES_COMPONENT, _FILES_SCHEMA)
            version = schema_version(conn, _FILES_COMPONENT)
        if version is not None and version != _FILES_VERSION:
            raise DatabaseError(
                f"{self._label}: {_FILES_COMPONENT} schema version {version}, this library"
                f" reads version {_FILES_VERSION}",
                _pg.redact(self._pool.conninfo),
            )
        self._files_ready = version is not None
        return self._files_ready

    def side_files(self) -> list[str]:
        """See :meth:`LedgerStore.side_files`: the tenant's rows of ``mm_ledger_files``
        (none when the table is not installed).

        Raises:
            DatabaseError: a driver failure.
        """

        def work(conn: Any, tenant: int) -> list[str]:
            if not self._files_table(conn, create=False):
                return []
            rows = conn.execute(
                "SELECT name FROM mm_ledger_files WHERE tenant_id = %s ORDER BY name", (tenant,)
            ).fetchall()
            return [str(row[0]) for row in rows if SIDE_FILE_NAME.fullmatch(str(row[0]))]

        none: list[str] = []
        return self.with_connection("list the files beside the ledger", work, default=none)

    def read_side_file(self, name: str) -> bytes | None:
        """See :meth:`LedgerStore.read_side_file`: the ``body`` of the tenant's row
        ``name`` in ``mm_ledger_files`` (in this thread's block: its transaction or
        snapshot).

        Raises:
            LedgerError: ``name`` is not one of ``SIDE_FILE_NAME``.
            DatabaseError: a driver failure.
        """
        check_side_file_name(name, self._label)

        def work(conn: Any, tenant: int) -> bytes | None:
            if not self._files_table(conn, create=False):
                return None
            row = conn.execute(
                "SELECT body FROM mm_ledger_files WHERE tenant_id = %s AND name = %s",
                (tenant, name),
            ).fetchone()
            return None if row is None else bytes(row[0])

        return self.with_connection("read a file beside the ledger", work, default=None)

    def write_side_file(self, name: str, data: bytes) -> None:
        """See :meth:`LedgerStore.write_side_file`: the tenant's row ``name`` of
        ``mm_ledger_files`` upserted, in one transaction (inside this thread's
        ``locked(write=True)`` block: that block's, committed with it); the table is
        installed first when missing.

        Raises:
            LedgerError: ``name`` is not one of ``SIDE_FILE_NAME``, or this thread holds a
                read-only block of this store.
            FileNotFoundError: the tenant does not exist.
            DatabaseError: a driver failure (nothing is written).
        """
        check_side_file_name(name, self._label)
        body = bytes(data)
        ctx = self._context()
        if ctx is not None:
            if not ctx.write:
                raise LedgerError(f"{self._label}: cannot write under a read-only lock")
            self._begin(ctx)

            def in_block() -> None:
                self._files_table(ctx.conn, create=True)
                ctx.conn.execute(_UPSERT_FILE, (ctx.tenant_id, name, body))

            self._guard("write a file beside the ledger", in_block)
            return

        def pooled() -> None:
            with self._pool.connection() as conn:
                tenant = self._lookup(conn, create=False)
                if tenant is None:
                    raise FileNotFoundError(f"no tenant {self.tenant!r} in {self._label}")
                self._files_table(conn, create=True)
                with conn.transaction():
                    conn.execute(_UPSERT_FILE, (tenant, name, body))

        self._guard("write a file beside the ledger", pooled)

    def close(self) -> None:
        """Close the pooled connections (blocks in progress keep theirs until they end)."""
        self._pool.close()
