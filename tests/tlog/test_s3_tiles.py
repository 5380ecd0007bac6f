"""Tiles in S3-compatible object storage (issue 19): published from folder and PostgreSQL
tenants to the rclone S3 server, byte for byte what a folder publish writes, verified with the
tiles client; every tile and bundle PUT before the checkpoint's, the writer killed mid-publish.

Needs the servers of ``.ci/with-servers`` (skips without them on a user's machine, fails in CI).
"""

from __future__ import annotations

import json
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from servers import S3Server
from support import REPO, run_main

from merkle_memory import canonical
from merkle_memory.errors import RootMismatchError, TileError, TileNotFoundError
from merkle_memory.ledger import Entry, Ledger, PostgresLedgerStore
from merkle_memory.signed_note import HmacKey
from merkle_memory.tlog import FolderSink, S3Tiles, Tile, TileClient, publish_tiles
from merkle_memory.tlog.s3 import split_s3_url
from merkle_memory.tlog.tiles import ENTRIES_LEVEL, edge_tiles, new_tiles

ORIGIN = "example.com/agents/s3"
KEY = HmacKey("example.com/agents", bytes(range(64, 96)))
TS = 1_700_000_000.0


def _append(ledger: Ledger, start: int, stop: int) -> None:
    for base in range(start, stop, 10_000):
        items = [(f"mem-{i}", f"{i:064x}") for i in range(base, min(base + 10_000, stop))]
        ledger.append_many(items, ts=TS)


def _folder_ledger(root: Path, size: int) -> Path:
    tenant = root / "tenant"
    tenant.mkdir(parents=True)
    _append(Ledger(tenant / "ledger.jsonl"), 0, size)
    return tenant


def _bucket(server: S3Server) -> str:
    name = f"mm-{secrets.token_hex(6)}"
    server.client().create_bucket(Bucket=name)
    return name


def _objects(server: S3Server, bucket: str, prefix: str) -> dict[str, bytes]:
    """Every object under ``prefix/``, by its path below the prefix."""
    client = server.client()
    out: dict[str, bytes] = {}
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=bucket, Prefix=prefix + "/"
    ):
        for item in page.get("Contents", []):
            key = item["Key"]
            out[key[len(prefix) + 1 :]] = client.get_object(Bucket=bucket, Key=key)["Body"].read()
    return out


def _files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _expected_paths(old: int, new: int) -> list[str]:
    """The tiles and bundles a publish from ``old`` to ``new`` leaves writes, in order."""
    out: list[str] = []
    for tile in new_tiles(old, new):
        out.append(tile.path())
        if tile.level == 0:
            out.append(Tile(ENTRIES_LEVEL, tile.index, tile.width).path())
    return out


def _lines(ledger: Ledger) -> list[bytes]:
    return [entry.line() for entry in ledger.entries()]


def _check_client(client: TileClient, lines: list[bytes], samples: int, seed: int) -> None:
    """Random entries: the bundle's entry is the ledger's line, its proof verifies."""
    assert client.size == len(lines)
    for index in random.Random(seed).sample(range(len(lines)), samples):
        assert client.entry(index) == lines[index]
        assert len(client.verify_leaf(index, lines[index])) > 0


def test_a_folder_tenant_in_s3_is_the_folder_publish_byte_for_byte(
    s3_server: S3Server, tmp_path: Path
) -> None:
    """A 1,300-entry folder tenant published to s3://bucket/a/b holds exactly the objects a
    folder publish writes (same paths below the prefix, same bytes); the tiles client reads
    it from the bucket and verifies every tile and bundle; tiles are served as immutable
    octet streams, the checkpoint as text that is not cached."""
    tenant = _folder_ledger(tmp_path, 1300)
    bucket = _bucket(s3_server)
    sink = S3Tiles(f"s3://{bucket}/a/b/", client=s3_server.client())
    assert sink.label == f"s3://{bucket}/a/b"
    report = publish_tiles(tenant, sink, ORIGIN, [KEY])
    folder = publish_tiles(tenant, tmp_path / "public", ORIGIN, [KEY])
    assert report == folder
    assert (report.old_size, report.size, report.kept, report.checkpoint_written) == (
        0,
        1300,
        (),
        True,
    )
    assert list(report.written) == _expected_paths(0, 1300)
    objects = _objects(s3_server, bucket, "a/b")
    assert objects == _files(tmp_path / "public")
    assert sorted(objects) == sorted([*report.written, "checkpoint"])
    client = TileClient.open(S3Tiles(f"s3://{bucket}/a/b", client=s3_server.client()), [KEY])
    assert client.audit() == len(report.written)
    _check_client(client, _lines(Ledger(tenant / "ledger.jsonl")), 50, 1)
    head = s3_server.client().head_object(Bucket=bucket, Key="a/b/tile/0/000")
    assert (head["ContentType"], head["CacheControl"]) == (
        "application/octet-stream",
        "public, max-age=31536000, immutable",
    )
    head = s3_server.client().head_object(Bucket=bucket, Key="a/b/checkpoint")
    assert (head["ContentType"], head["CacheControl"]) == ("text/plain; charset=utf-8", "no-cache")


def test_incremental_publish_writes_only_new_objects(s3_server: S3Server, tmp_path: Path) -> None:
    """Published at 1,000 entries, then at 1,300 after more appends: the second run reads
    the bucket's checkpoint and PUTs only the tiles new since (old partial tiles stay), the
    third writes nothing; the bucket still equals the folder published the same way, and
    the new tree is proven consistent with the old checkpoint from the bucket alone."""
    tenant = _folder_ledger(tmp_path, 1000)
    ledger = Ledger(tenant / "ledger.jsonl")
    bucket = _bucket(s3_server)
    url = f"s3://{bucket}/log"
    publish_tiles(tenant, S3Tiles(url, client=s3_server.client()), ORIGIN, [KEY])
    publish_tiles(tenant, tmp_path / "public", ORIGIN, [KEY])
    old = TileClient.open(S3Tiles(url, client=s3_server.client()), [KEY]).checkpoint
    _append(ledger, 1000, 1300)
    report = publish_tiles(tenant, S3Tiles(url, client=s3_server.client()), ORIGIN, [KEY])
    assert (report.old_size, report.size, report.kept, report.repaired) == (1000, 1300, (), ())
    assert list(report.written) == _expected_paths(1000, 1300)
    again = publish_tiles(tenant, S3Tiles(url, client=s3_server.client()), ORIGIN, [KEY])
    assert (again.written, again.checkpoint_written) == ((), False)
    publish_tiles(tenant, tmp_path / "public", ORIGIN, [KEY])
    objects = _objects(s3_server, bucket, "log")
    assert objects == _files(tmp_path / "public")
    assert "tile/0/003.p/232" in objects  # the partial tile of size 1,000 stays
    client = TileClient.open(S3Tiles(url, client=s3_server.client()), [KEY])
    assert client.audit() == len(_expected_paths(0, 1300))
    assert len(client.verify_extends(old)) > 0
    _check_client(client, _lines(ledger), 30, 2)


def test_a_postgresql_tenant_in_s3_equals_the_folder_tenants_tiles(
    s3_server: S3Server, postgres_url: str, tmp_path: Path
) -> None:
    """A PostgreSQL tenant and a folder tenant given the same appends publish the same
    objects, byte for byte (the stored lines are the file ledger's lines); incremental from
    the database too."""
    url = postgres_url + "#cc"
    store = PostgresLedgerStore(url)
    try:
        ledger = Ledger(store)
        _append(ledger, 0, 700)
        tenant = _folder_ledger(tmp_path, 700)
        bucket = _bucket(s3_server)
        first = publish_tiles(
            url, S3Tiles(f"s3://{bucket}/pg", client=s3_server.client()), ORIGIN, [KEY]
        )
        assert list(first.written) == _expected_paths(0, 700)
        publish_tiles(tenant, tmp_path / "public", ORIGIN, [KEY])
        assert _objects(s3_server, bucket, "pg") == _files(tmp_path / "public")
        _append(ledger, 700, 900)
        _append(Ledger(tenant / "ledger.jsonl"), 700, 900)
        second = publish_tiles(
            ledger, S3Tiles(f"s3://{bucket}/pg", client=s3_server.client()), ORIGIN, [KEY]
        )
        assert (second.old_size, list(second.written)) == (700, _expected_paths(700, 900))
        publish_tiles(tenant, tmp_path / "public", ORIGIN, [KEY])
        assert _objects(s3_server, bucket, "pg") == _files(tmp_path / "public")
        client = TileClient.open(S3Tiles(f"s3://{bucket}/pg", client=s3_server.client()), [KEY])
        assert client.audit() == len(_expected_paths(0, 900))
        _check_client(client, _lines(ledger), 30, 3)
    finally:
        store.close()


def _record_puts(client: Any) -> list[dict[str, str]]:
    """Record each PutObject as its request goes out: the key and the request headers."""
    sent: list[dict[str, str]] = []

    def before_send(request: Any, **_: Any) -> None:
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        sent.append({"url": request.url, **headers})

    client.meta.events.register("before-send.s3.PutObject", before_send)
    return sent


def test_every_tile_put_precedes_the_checkpoint_put(s3_server: S3Server, tmp_path: Path) -> None:
    """Recorded at the wire: each run PUTs its tiles and bundles (in the report's order),
    then the checkpoint, last; no PUT is conditional (no If-None-Match / If-Match) and each
    carries Content-MD5; a run with nothing new PUTs nothing."""
    tenant = _folder_ledger(tmp_path, 600)
    bucket = _bucket(s3_server)
    base = f"{s3_server.endpoint}/{bucket}/log/"
    for size in (600, 1300, 1300):
        _append(Ledger(tenant / "ledger.jsonl"), len(_lines(Ledger(tenant / "ledger.jsonl"))), size)
        client = s3_server.client()
        sent = _record_puts(client)
        report = publish_tiles(tenant, S3Tiles(f"s3://{bucket}/log", client=client), ORIGIN, [KEY])
        keys = [item["url"].removeprefix(base) for item in sent]
        expected = [*report.written, "checkpoint"] if report.checkpoint_written else []
        assert keys == expected
        for item in sent:
            lowered = {k.lower() for k in item}
            assert "content-md5" in lowered
            assert not lowered & {"if-none-match", "if-match"}
    assert report.size == 1300


def _run_killed(server: S3Server, tenant: Path, url: str, when: str, k: int) -> int:
    """Publish ``tenant`` to ``url`` in a forked child that SIGKILLs itself before its k-th
    PutObject is sent (``when="before"``) or once it was answered (``"after"``); return the
    child's wait status."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            client = server.client()
            count = 0

            def hook(**_: Any) -> None:
                nonlocal count
                count += 1
                if count == k:
                    os.kill(os.getpid(), signal.SIGKILL)

            event = "before-send" if when == "before" else "after-call"
            client.meta.events.register(event + ".s3.PutObject", hook)
            publish_tiles(tenant, S3Tiles(url, client=client), ORIGIN, [KEY])
        finally:
            os._exit(3)
    _, status = os.waitpid(pid, 0)
    return status


def _assert_consistent(server: S3Server, bucket: str, prefix: str, sizes: tuple[int, ...]) -> int:
    """The bucket's checkpoint, if any, is of one of ``sizes`` and every tile and bundle it
    names is there and verifies; return its size (0 without a checkpoint)."""
    fetcher = S3Tiles(f"s3://{bucket}/{prefix}", client=server.client())
    try:
        client = TileClient.open(fetcher, [KEY])
    except TileNotFoundError:
        assert 0 in sizes
        return 0
    assert client.size in sizes
    assert client.audit() == len(_expected_paths(0, client.size))
    return client.size


def test_a_killed_publisher_never_leaves_a_checkpoint_ahead_of_its_tiles(
    s3_server: S3Server, tmp_path: Path
) -> None:
    """The publisher (a forked child) is SIGKILLed before its k-th PUT goes out and after
    the k-th PUT was acknowledged, for every k of a first publish (0 -> 600 entries) and of an
    incremental one (600 -> 1,000): after each kill the bucket's checkpoint is absent or the
    old one or the new one, and every tile and bundle it names is there and verifies; a
    re-run then completes, PUTting only what is missing and keeping what the killed run
    wrote (the same immutable bytes)."""
    small = _folder_ledger(tmp_path / "small", 600)
    big = tmp_path / "big"
    shutil.copytree(small, big)
    _append(Ledger(big / "ledger.jsonl"), 600, 1000)
    bucket = _bucket(s3_server)
    cases = [("fresh", small, 0, 600), ("inc", big, 600, 1000)]
    for name, tenant, old, new in cases:
        puts = len(_expected_paths(old, new)) + 1  # and the checkpoint
        for when in ("before", "after"):
            for k in range(1, puts + 1):
                prefix = f"{name}/{when}/{k}"
                url = f"s3://{bucket}/{prefix}"
                if old:
                    publish_tiles(small, S3Tiles(url, client=s3_server.client()), ORIGIN, [KEY])
                status = _run_killed(s3_server, tenant, url, when, k)
                assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
                size = _assert_consistent(s3_server, bucket, prefix, (old, new))
                # the checkpoint is the new one exactly when its PUT was acknowledged
                assert size == (new if (when, k) == ("after", puts) else old), (prefix, size)
                rerun = publish_tiles(
                    tenant, S3Tiles(url, client=s3_server.client()), ORIGIN, [KEY]
                )
                done = k if when == "after" else k - 1
                expected = _expected_paths(old, new)
                if size == new:
                    assert (rerun.written, rerun.kept, rerun.checkpoint_written) == ((), (), False)
                else:
                    assert list(rerun.kept) == expected[:done]
                    assert list(rerun.written) == expected[done:]
                    assert rerun.checkpoint_written
                assert _assert_consistent(s3_server, bucket, prefix, (new,)) == new


@pytest.mark.slow
def test_a_100000_entry_postgresql_ledger_in_s3_verifies(
    s3_server: S3Server,
    postgres_url: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Acceptance: a 100,000-entry PostgreSQL ledger published to the S3 server (785 tiles
    and bundles, then the checkpoint) verifies with the tiles client: every tile and bundle
    authenticated, its root the tenant's, 200 random entries the ones appended (seq, memory
    id, content hash, chained to the entry before) with their proofs; the same through
    ``ledger verify-tiles``. (Measured 13-19 s on 2 shared cores, 3.4 s of it the appends.)"""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret)
    url = postgres_url + "#big"
    store = PostgresLedgerStore(url)
    try:
        ledger = Ledger(store)
        _append(ledger, 0, 100_000)
        bucket = _bucket(s3_server)
        sink = S3Tiles(f"s3://{bucket}/big", client=s3_server.client())
        report = publish_tiles(url, sink, ORIGIN, [KEY])
        assert (report.size, len(report.written)) == (100_000, 785)
        assert list(report.written) == _expected_paths(0, 100_000)
        client = TileClient.open(S3Tiles(f"s3://{bucket}/big", client=s3_server.client()), [KEY])
        assert client.checkpoint.root == store.sidecar().root(100_000)
        assert client.audit() == 785
        for index in random.Random(4).sample(range(1, 100_000), 200):
            entry = Entry.from_dict(canonical.loads(client.entry(index)), check_hash=True)
            before = Entry.from_dict(canonical.loads(client.entry(index - 1)), check_hash=True)
            assert entry.line() == client.entry(index)
            assert (entry.seq, entry.memory_id, entry.content_sha256, entry.prev) == (
                index + 1,
                f"mem-{index}",
                f"{index:064x}",
                before.hash,
            )
            assert len(client.inclusion_proof(index)) == 17
    finally:
        store.close()
    key = tmp_path / "log.key"
    key.write_text(KEY.skey() + "\n")
    code, out, err = run_main(
        capsys, "ledger", "verify-tiles", f"s3://{bucket}/big", "--endpoint", s3_server.endpoint,
        "--key", str(key), "--no-entries",
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert out.endswith(": 394 tiles checked\n")


def test_s3_errors_are_tile_errors(s3_server: S3Server, tmp_path: Path) -> None:
    """A missing bucket, a missing checkpoint, an altered tile and bad locations raise the
    library's errors (never a boto3 exception)."""
    tenant = _folder_ledger(tmp_path, 300)
    missing = f"mm-missing-{secrets.token_hex(4)}"
    with pytest.raises(TileError) as info:
        publish_tiles(
            tenant, S3Tiles(f"s3://{missing}/x", client=s3_server.client()), ORIGIN, [KEY]
        )
    assert str(info.value) == f"s3://{missing}/x/checkpoint: cannot read: no bucket {missing!r}"
    bucket = _bucket(s3_server)
    with pytest.raises(TileNotFoundError, match=f"s3://{bucket}/x/checkpoint: not found"):
        TileClient.open(S3Tiles(f"s3://{bucket}/x", client=s3_server.client()), [KEY])
    publish_tiles(tenant, S3Tiles(f"s3://{bucket}/x", client=s3_server.client()), ORIGIN, [KEY])
    client = s3_server.client()
    data = bytearray(client.get_object(Bucket=bucket, Key="x/tile/0/000")["Body"].read())
    data[5] ^= 1
    client.put_object(Bucket=bucket, Key="x/tile/0/000", Body=bytes(data))
    with pytest.raises(RootMismatchError):
        TileClient.open(S3Tiles(f"s3://{bucket}/x", client=s3_server.client()), [KEY]).audit()
    with pytest.raises(TileError, match="another log's"):
        publish_tiles(tenant, S3Tiles(f"s3://{bucket}/x", client=client), "other/origin", [KEY])
    for bad in ("s3://", "s3:///p", "http://b/p", "s3://b/a/../c", "s3://b/a//c"):
        with pytest.raises(TileError):
            split_s3_url(bad)
    assert split_s3_url("s3://b") == ("b", "")
    assert split_s3_url("s3://b/a/c/") == ("b", "a/c")
    with pytest.raises(TileError, match="http:// or https://"):
        S3Tiles("s3://b/p", endpoint="127.0.0.1:9000")
    with pytest.raises(TileError, match="either a boto3 client"):
        S3Tiles("s3://b/p", endpoint=s3_server.endpoint, client=client)


def test_cli_tiles_to_s3_and_verify_tiles_from_s3(
    s3_server: S3Server,
    postgres_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``ledger tiles postgresql://...#t s3://bucket/p --endpoint URL`` (credentials from
    AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY) publishes, ``ledger verify-tiles s3://...``
    verifies every tile and bundle; an altered tile makes it exit 1 with one error line;
    --endpoint with a folder is a usage error (exit 2)."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", s3_server.key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_server.secret)
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    url = postgres_url + "#t"
    store = PostgresLedgerStore(url)
    try:
        _append(Ledger(store), 0, 520)
    finally:
        store.close()
    key = tmp_path / "log.key"
    key.write_text(KEY.skey() + "\n")
    bucket = _bucket(s3_server)
    target = f"s3://{bucket}/cc"
    ep = ("--endpoint", s3_server.endpoint)
    code, out, err = run_main(
        capsys, "ledger", "tiles", url, target, *ep, "--origin", ORIGIN, "--key", str(key), "--json"
    )
    assert (code, err) == (
        0,
        "published tree of size 520 (was 0): 7 files written, 0 already there\n",
    )
    doc = json.loads(out)
    assert (doc["tree_size"], doc["written"], doc["checkpoint_written"]) == (
        520,
        _expected_paths(0, 520),
        True,
    )
    code, out, err = run_main(
        capsys,
        "ledger",
        "verify-tiles",
        target,
        *ep,
        "--key",
        str(key),
        "--origin",
        ORIGIN,
        "--json",
    )
    assert (code, err) == (0, "")
    assert json.loads(out) == {
        "origin": ORIGIN,
        "tree_size": 520,
        "root_hash": doc["root_hash"],
        "checked": 7,
        "entries": True,
    }
    code, out, err = run_main(capsys, "ledger", "verify-tiles", target, *ep, "--key", str(key))
    assert (code, err) == (0, "")
    assert out == (
        f"verified: {ORIGIN} tree size 520 root {doc['root_hash']}: "
        "7 tiles and entry bundles checked\n"
    )
    client = s3_server.client()
    data = client.get_object(Bucket=bucket, Key="cc/tile/entries/001")["Body"].read()
    client.put_object(Bucket=bucket, Key="cc/tile/entries/001", Body=data[:-1] + b"X")
    code, out, err = run_main(capsys, "ledger", "verify-tiles", target, *ep, "--key", str(key))
    assert (code, out) == (1, "")
    assert err == "error: tile/entries/001: entry 511 does not hash to its leaf\n"
    code, out, err = run_main(
        capsys, "ledger", "verify-tiles", target, *ep, "--key", str(key), "--no-entries"
    )
    assert (code, out.split(": ")[-1]) == (0, "4 tiles checked\n")
    code, out, err = run_main(
        capsys, "ledger", "verify-tiles", str(tmp_path), *ep, "--key", str(key)
    )
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].endswith(
        "error: --endpoint and --region are for an s3://bucket/prefix location"
    )


_NO_BOTO3 = """
import sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("boto3", "botocore"):
            raise ImportError(f"blocked: {name}")
        return None

sys.meta_path.insert(0, Block())
from merkle_memory.cli import main
from merkle_memory import canonical
from merkle_memory.errors import TileError
from merkle_memory.tlog import S3Tiles
try:
    S3Tiles("s3://bucket/prefix")
except TileError as exc:
    print(exc)
sys.exit(main(sys.argv[1:]))
"""


def test_without_boto3_s3_says_which_extra_to_install(tmp_path: Path) -> None:
    """With boto3 unimportable, S3Tiles raises TileError naming the extra ``s3``, and
    ``ledger tiles TENANT s3://...`` exits 1 with that one error line (no traceback)."""
    tenant = _folder_ledger(tmp_path, 3)
    key = tmp_path / "log.key"
    key.write_text(KEY.skey() + "\n")
    done = subprocess.run(
        [sys.executable, "-c", _NO_BOTO3, "ledger", "tiles", str(tenant), "s3://bucket/p",
         "--origin", ORIGIN, "--key", str(key)],
        cwd=REPO,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    why = "S3 support needs boto3: pip install 'merkle_memory[s3]' (blocked: boto3)"
    assert (done.returncode, done.stdout, done.stderr) == (1, why + "\n", f"error: {why}\n")


def test_verify_tiles_from_a_folder_and_its_refusals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``ledger verify-tiles FOLDER`` verifies a folder publish; a missing folder, a file,
    a wrong key and a missing tile exit 1 with one error line."""
    tenant = _folder_ledger(tmp_path, 300)
    publish_tiles(tenant, tmp_path / "pub", ORIGIN, [KEY])
    key = tmp_path / "log.key"
    key.write_text(KEY.skey() + "\n")
    code, out, err = run_main(
        capsys, "ledger", "verify-tiles", str(tmp_path / "pub"), "--key", str(key)
    )
    assert (code, err) == (0, "")
    assert out.endswith(": 5 tiles and entry bundles checked\n")
    other = tmp_path / "other.key"
    other.write_text(HmacKey("example.com/agents", bytes(32)).skey() + "\n")
    code, out, err = run_main(
        capsys, "ledger", "verify-tiles", str(tmp_path / "pub"), "--key", str(other)
    )
    assert (code, out) == (1, "")
    assert err.startswith("error: ") and err.count("\n") == 1
    code, out, err = run_main(
        capsys, "ledger", "verify-tiles", str(tmp_path / "nope"), "--key", str(key)
    )
    assert (code, out, err) == (1, "", f"error: {tmp_path / 'nope'}: does not exist\n")
    code, out, err = run_main(capsys, "ledger", "verify-tiles", str(key), "--key", str(key))
    assert (code, out, err) == (1, "", f"error: {key}: not a folder\n")
    (tmp_path / "pub" / "tile/0/000").unlink()
    code, out, err = run_main(
        capsys, "ledger", "verify-tiles", str(tmp_path / "pub"), "--key", str(key)
    )
    assert (code, out) == (1, "")
    assert err == f"error: {tmp_path / 'pub' / 'tile/0/000'}: not found\n"


class _RecordingSink:
    """A ``TileSink`` over a folder that records every call, and lists what it holds when
    ``listing`` is set."""

    def __init__(self, folder: Path, *, listing: bool) -> None:
        self.inner = FolderSink(folder)
        self.listing = listing
        self.calls: list[tuple[str, str]] = []

    @property
    def label(self) -> str:
        return self.inner.label

    def read(self, path: str) -> bytes | None:
        self.calls.append(("read", path))
        return self.inner.read(path)

    def names(self, prefix: str) -> frozenset[str] | None:
        self.calls.append(("names", prefix))
        if not self.listing:
            return None
        return frozenset(p for p in _files(self.inner.folder) if p.startswith(prefix))

    def put(self, path: str, data: bytes) -> None:
        self.calls.append(("put", path))
        self.inner.put(path, data)

    def flush(self) -> None:
        self.calls.append(("flush", ""))
        self.inner.flush()

    def put_checkpoint(self, data: bytes) -> None:
        self.calls.append(("checkpoint", ""))
        self.inner.put_checkpoint(data)


@pytest.mark.parametrize("listing", [False, True])
def test_write_tiles_puts_every_tile_then_flushes_then_the_checkpoint(
    tmp_path: Path, listing: bool
) -> None:
    """Through any sink, each run PUTs its new tiles and bundles, flushes, and only then
    replaces the checkpoint; a sink that lists what it holds is never asked to read a path
    it did not list; the files are those of a plain folder publish."""
    tenant = _folder_ledger(tmp_path, 0)
    sink = _RecordingSink(tmp_path / "sink", listing=listing)
    for old, new in ((0, 600), (600, 1000), (1000, 1000)):
        _append(Ledger(tenant / "ledger.jsonl"), old, new)
        sink.calls.clear()
        report = publish_tiles(tenant, sink, ORIGIN, [KEY])
        publish_tiles(tenant, tmp_path / "plain", ORIGIN, [KEY])
        writes = [c for c in sink.calls if c[0] in ("put", "flush", "checkpoint")]
        tail = [("checkpoint", "")] if old != new else []
        assert writes == [*(("put", p) for p in _expected_paths(old, new)), ("flush", ""), *tail]
        assert report.written == tuple(_expected_paths(old, new))
        assert sink.calls.count(("names", "tile/")) == 1
        if listing:
            # the published tree's tiles (checked), then the new right edge (read back)
            reads = {p for kind, p in sink.calls if kind == "read"} - {"checkpoint"}
            assert reads == set(_expected_paths(0, old)) | {t.path() for t in edge_tiles(new)}
    assert _files(tmp_path / "sink") == _files(tmp_path / "plain")


def test_a_silent_endpoint_fails_with_one_line_naming_it(
    s3_server: S3Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An endpoint that accepts connections and never answers: with --timeout 1, verify-tiles
    and tiles (run side by side) exit 1 with one error line naming the endpoint, the timeout
    and the attempts; --timeout for a folder location is a usage error."""
    import socket

    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "AWS_ACCESS_KEY_ID": s3_server.key or "k",
        "AWS_SECRET_ACCESS_KEY": s3_server.secret or "s",
    }
    tenant = _folder_ledger(tmp_path, 3)
    key = tmp_path / "log.key"
    key.write_text(KEY.skey() + "\n")  # an HMAC key verifies in the same form
    with socket.create_server(("127.0.0.1", 0)) as silent:  # the kernel accepts; no answer
        endpoint = f"http://127.0.0.1:{silent.getsockname()[1]}"
        runs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "merkle_memory",
                    "ledger",
                    *argv,
                    "--endpoint",
                    endpoint,
                    "--timeout",
                    "1",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            )
            for argv in (
                ("verify-tiles", "s3://logs/cc", "--key", str(key)),
                ("tiles", str(tenant), "s3://logs/cc", "--origin", ORIGIN, "--key", str(key)),
            )
        ]
        results = [(run.wait(timeout=120), *run.communicate()) for run in runs]
    line = (
        "error: s3://logs/cc/checkpoint: cannot read: no answer from the S3 endpoint "
        f"{endpoint} within 1 s (3 attempts)\n"
    )
    assert results == [(1, "", line), (1, "", line)]
    code, _out, err = run_main(
        capsys, "ledger", "verify-tiles", str(tmp_path), "--key", str(key), "--timeout", "1"
    )
    assert code == 2 and err.endswith("error: --timeout is for an s3:// or http(s):// location\n")
