"""Fixtures for the tests that need real servers: PostgreSQL and an S3-compatible store.

``bash .ci/with-servers COMMAND`` starts both (a throwaway PostgreSQL cluster on a Unix socket,
rclone's S3 server on loopback), runs COMMAND and stops them; it exports:

* ``MERKLE_MEMORY_TEST_POSTGRES``: a libpq URL of a superuser connection;
* ``MERKLE_MEMORY_TEST_S3`` (``http://127.0.0.1:PORT``), ``MERKLE_MEMORY_TEST_S3_KEY`` and
  ``MERKLE_MEMORY_TEST_S3_SECRET``;
* ``MERKLE_MEMORY_REQUIRE_SERVERS=1``: a test whose server (or client library) is missing then
  fails instead of skipping, so CI can never pass by skipping them.

Without those variables (a user's machine) such tests skip with the reason. Each PostgreSQL
test gets a schema of its own (``options=-csearch_path=...`` in its URL), dropped afterwards.
"""

from __future__ import annotations

import os
import re
import secrets
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, NoReturn
from urllib.parse import quote

import pytest

REQUIRE = "MERKLE_MEMORY_REQUIRE_SERVERS"
POSTGRES = "MERKLE_MEMORY_TEST_POSTGRES"
S3 = "MERKLE_MEMORY_TEST_S3"
HOW = "run the tests under `bash .ci/with-servers python -m pytest` (see README)"


def unavailable(reason: str) -> NoReturn:
    """Skip the calling test, or fail it when the servers are required (CI)."""
    if os.environ.get(REQUIRE) == "1":
        pytest.fail(f"{reason}, but {REQUIRE}=1 requires it", pytrace=False)
    pytest.skip(f"{reason}: {HOW}")


def postgres_base_url() -> str:
    """The server's URL from the environment, after checking the driver is importable."""
    url = os.environ.get(POSTGRES)
    if not url:
        unavailable(f"no PostgreSQL server ({POSTGRES} is not set)")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[postgres]')")
    return url


def with_search_path(url: str, schema: str) -> str:
    """``url`` whose sessions use ``schema`` first (libpq ``options``)."""
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}options={quote(f'-csearch_path={schema}')}"


def admin(url: str) -> Any:
    """An autocommit psycopg connection to ``url`` (for fixtures and tampering tests)."""
    import psycopg

    return psycopg.connect(url, autocommit=True)


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A PostgreSQL URL (no fragment) whose tables live in a fresh schema of their own."""
    base = postgres_base_url()
    schema = f"mm_test_{secrets.token_hex(6)}"
    with admin(base) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield with_search_path(base, schema)
    finally:
        with admin(base) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


@dataclass(frozen=True, slots=True)
class S3Server:
    """Where the test S3 server listens and the key that opens it."""

    endpoint: str
    key: str
    secret: str

    def client(self) -> Any:
        """A boto3 S3 client for this server."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.key,
            aws_secret_access_key=self.secret,
            region_name="us-east-1",
        )


@pytest.fixture
def s3_server() -> S3Server:
    """The S3-compatible test server (skips, or fails under CI, when absent)."""
    endpoint = os.environ.get(S3)
    if not endpoint:
        unavailable(f"no S3-compatible server ({S3} is not set)")
    try:
        import boto3  # noqa: F401
    except ImportError:
        unavailable("boto3 is not installed (pip install -e '.[s3]')")
    return S3Server(endpoint, os.environ.get(S3 + "_KEY", ""), os.environ.get(S3 + "_SECRET", ""))


@dataclass(frozen=True, slots=True)
class ArchiveTarget:
    """A node store that keeps the ``dag sync`` archive, as the tests reach it.

    Attributes:
        kind: ``"sqlite"`` or ``"postgres"``.
        store: what ``--store`` and ``open_store`` take (a file path or a URL).
        location: how the library names it in messages (the URL without its password).
    """

    kind: str
    store: str
    location: str

    def sql(self, statement: str, *args: Any) -> list[tuple[Any, ...]]:
        """Run one statement on the store's tables outside the library (to tamper with them
        or read them raw): ``{table}`` names a table, ``?`` a parameter."""
        prefix, mark = ("", "?") if self.kind == "sqlite" else ("mm_", "%s")
        text = re.sub(r"\{([a-z_]+)\}", lambda m: prefix + m.group(1), statement)
        if self.kind == "sqlite":
            con = sqlite3.connect(self.store)
            try:
                rows = con.execute(text, args).fetchall()
                con.commit()
                return rows
            finally:
                con.close()
        with admin(self.store) as conn:
            cursor = conn.execute(text.replace("?", mark), args)
            return cursor.fetchall() if cursor.description else []

    def hashes(self) -> set[str]:
        """The hashes of every stored node."""
        return {str(row[0]) for row in self.sql("SELECT hash FROM {nodes}")}


@pytest.fixture(params=["sqlite", "postgres"])
def archive_store(request: pytest.FixtureRequest, tmp_path: Any) -> ArchiveTarget:
    """Each node store that archives (``dag sync``): a SQLite file not yet created, and a
    PostgreSQL schema of its own (skipped, or failed under CI, without the server)."""
    if request.param == "sqlite":
        path = str(tmp_path / "archive.db")
        return ArchiveTarget("sqlite", path, path)
    url = request.getfixturevalue("postgres_url")
    return ArchiveTarget("postgres", url, url)
