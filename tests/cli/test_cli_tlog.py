"""``ledger tiles|witness|verify-checkpoint``, ``prove/verify-proof --bundle``, ``keygen --type
cosigner`` (issue 18)."""

from __future__ import annotations

import functools
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import run_main

from merkle_memory.ledger import Ledger
from merkle_memory.signed_note import (
    CosignatureVerifier,
    HmacKey,
    cosigner_from_key,
    signer_from_key,
    verifier_from_key,
)
from merkle_memory.tlog import Witness, WitnessServer

pytest.importorskip("cryptography", reason="witness keys need the optional extra 'ed25519'")

ORIGIN = "example.com/agents/cc"
LOG = HmacKey("example.com/agents", bytes(range(32)))


@pytest.fixture
def setup(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Path]:
    """A tenant with 9 entries, the log's key file, two witness key pairs made by keygen."""
    tenant = tmp_path / "cc"
    tenant.mkdir()
    Ledger(tenant / "ledger.jsonl").append_many(
        [(f"note-{i}", f"{i:064x}") for i in range(9)], ts=1_700_000_000.0
    )
    files = {"tenant": tenant, "log": tmp_path / "log.key"}
    files["log"].write_text(LOG.skey() + "\n")
    for name in ("w1", "w2"):
        key = tmp_path / f"{name}.key"
        code, out, _ = run_main(
            capsys, "ledger", "keygen", "--name", f"{name}.example", "--type", "cosigner",
            "--out", str(key),
        )  # fmt: skip
        assert code == 0
        (tmp_path / f"{name}.vkey").write_text(out)
        files[name], files[f"{name}v"] = key, tmp_path / f"{name}.vkey"
    return files


@pytest.fixture
def witness(setup: dict[str, Path], tmp_path: Path) -> Iterator[str]:
    """Witness w1 serving the log on loopback; yields its URL."""
    signer = cosigner_from_key(setup["w1"].read_text().strip())
    with WitnessServer(Witness(tmp_path / "w1.db", signer, {ORIGIN: [LOG]})) as server:
        yield server.url


def test_keygen_cosigner_writes_a_0x04_key(setup: dict[str, Path]) -> None:
    """--type cosigner writes a type-0x04 signer key and prints its verifier key."""
    skey = setup["w1"].read_text().strip()
    vkey = setup["w1v"].read_text().strip()
    assert cosigner_from_key(skey).verifier() == verifier_from_key(vkey)
    assert isinstance(verifier_from_key(vkey), CosignatureVerifier)
    assert setup["w1"].stat().st_mode & 0o777 == 0o600


def test_tiles_writes_then_writes_nothing_new(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger tiles` publishes the tree (JSON lists the files written); a second run writes
    nothing; without --json stdout is the checkpoint file."""
    out_dir = tmp_path / "public"
    args = [
        "ledger",
        "tiles",
        str(setup["tenant"]),
        str(out_dir),
        "--origin",
        ORIGIN,
        "--key",
        str(setup["log"]),
    ]
    code, out, err = run_main(capsys, *args, "--json")
    assert code == 0 and "published tree of size 9 (was 0): 2 files written" in err
    document = json.loads(out)
    assert document["written"] == ["tile/0/000.p/9", "tile/entries/000.p/9"]
    assert (document["tree_size"], document["old_size"], document["checkpoint_written"]) == (
        9,
        0,
        True,
    )
    code, out, err = run_main(capsys, *args)
    assert code == 0 and out == (out_dir / "checkpoint").read_text()
    assert "0 files written, 0 already there" in err
    code, _, err = run_main(
        capsys,
        "ledger",
        "tiles",
        str(tmp_path / "nope"),
        str(out_dir),
        "--origin",
        ORIGIN,
        "--key",
        str(setup["log"]),
    )
    assert code == 1 and err.startswith("error: ")


def test_witness_then_verify_checkpoint_with_a_quorum(
    setup: dict[str, Path], witness: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`ledger witness` prints and keeps the cosigned checkpoint; `verify-checkpoint` accepts
    it with w1 (quorum 1) and refuses it when w2 is also required."""
    tenant = setup["tenant"]
    base = ["--origin", ORIGIN, "--key", str(setup["log"]), "--url", witness]
    code, out, _ = run_main(
        capsys, "ledger", "witness", str(tenant), *base, "--witness-key", str(setup["w1v"])
    )
    assert code == 0 and out == (tenant / "ledger.cosigned").read_text()
    assert "\u2014 w1.example " in out
    (tenant.parent / "log.vkey").write_text(LOG.skey() + "\n")  # HMAC: its key verifies too
    check = [
        "ledger",
        "verify-checkpoint",
        str(tenant / "ledger.cosigned"),
        "--key",
        str(tenant.parent / "log.vkey"),
    ]
    code, out, _ = run_main(capsys, *check, "--witness", str(setup["w1v"]), "--origin", ORIGIN)
    assert code == 0
    assert out.startswith(f"verified: {ORIGIN} tree size 9 root ")
    assert out.endswith("; cosigned by 1 of 1 trusted witnesses (w1.example), quorum 1\n")
    code, out, _ = run_main(
        capsys,
        *check,
        "--witness",
        setup["w1v"].read_text().strip(),  # a key string, not a file
        "--witness",
        str(setup["w2v"]),
        "--quorum",
        "1",
        "--json",
    )
    document = json.loads(out)
    assert code == 0 and [c["witness"] for c in document["cosignatures"]] == ["w1.example"]
    code, _, err = run_main(
        capsys, *check, "--witness", str(setup["w1v"]), "--witness", str(setup["w2v"])
    )
    assert code == 1
    assert (
        err == "error: checkpoint is cosigned by 1 of the trusted witnesses, the policy needs 2\n"
    )
    code, _, err = run_main(capsys, *check, "--quorum", "-1")
    assert code == 2


def test_witness_refusals_exit_1(
    setup: dict[str, Path], witness: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A wrong --witness-key, an unknown log (other origin: 404) and no witness at the URL are
    one `error:` line and exit 1; nothing is kept."""
    tenant = setup["tenant"]
    base = ["ledger", "witness", str(tenant), "--key", str(setup["log"])]
    code, _, err = run_main(
        capsys, *base, "--origin", ORIGIN, "--url", witness, "--witness-key", str(setup["w2v"])
    )
    assert code == 1 and "does not verify with its key" in err
    assert not (tenant / "ledger.cosigned").exists()
    code, _, err = run_main(capsys, *base, "--origin", "other.example/log", "--url", witness)
    assert code == 1 and "\nerror: witness refused (HTTP 404): unknown log 'other.example" in err
    code, _, err = run_main(
        capsys, *base, "--origin", ORIGIN, "--url", "http://127.0.0.1:9", "--timeout", "5"
    )
    assert code == 1 and "no answer" in err


def test_prove_bundle_then_verify_offline(
    setup: dict[str, Path], witness: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`prove --bundle` writes a .tlog-proof (the cosigned checkpoint once witnessed);
    `verify-proof --bundle` exits 0 for it and 1 for a tampered one or another memory id."""
    tenant = setup["tenant"]
    run_main(
        capsys,
        "ledger",
        "witness",
        str(tenant),
        "--origin",
        ORIGIN,
        "--key",
        str(setup["log"]),
        "--url",
        witness,
    )
    bundle = tmp_path / "note-4.tlog-proof"
    code, out, err = run_main(
        capsys,
        "ledger",
        "prove",
        str(tenant),
        "--memory-id",
        "note-4",
        "--bundle",
        str(bundle),
        "--origin",
        ORIGIN,
        "--key",
        str(setup["log"]),
        "--json",
    )
    assert code == 0 and json.loads(out)["cosigned_by"] == ["w1.example"]
    assert bundle.read_text().startswith("c2sp.org/tlog-proof@v1\nextra ")
    verify = ["ledger", "verify-proof", "--bundle", str(bundle), "--key", str(setup["log"])]
    code, out, _ = run_main(
        capsys, *verify, "--witness", str(setup["w1v"]), "--memory-id", "note-4"
    )
    assert code == 0
    assert out.startswith(
        "verified: memory id 'note-4' (seq 5) is leaf 4 of example.com/agents/cc tree size 9 root "
    )
    assert out.endswith("; cosigned by 1 trusted witness\n")
    code, out, _ = run_main(capsys, *verify, "--json")
    assert code == 0 and json.loads(out)["seq"] == 5
    code, _, err = run_main(capsys, *verify, "--memory-id", "note-5")
    assert code == 1 and "note-4" in err
    lines = bundle.read_text().split("\n")
    lines[3] = ("A" if lines[3][0] != "A" else "B") + lines[3][1:]
    bundle.write_text("\n".join(lines))
    code, _, err = run_main(capsys, *verify)
    assert code == 1 and err.startswith("error: root mismatch")
    code, _, _ = run_main(capsys, "ledger", "verify-proof", "--bundle", str(bundle))
    assert code == 2
    code, _, _ = run_main(
        capsys, "ledger", "verify-proof", "p.json", "--bundle", str(bundle), "--key", "k"
    )
    assert code == 2
    code, _, err = run_main(
        capsys, "ledger", "prove", str(tenant), "--memory-id", "note-4", "--bundle", str(bundle)
    )
    assert code == 2 and err.endswith(
        "error: --bundle needs --origin and --key (the log's signer key file)\n"
    )
    code, _, err = run_main(
        capsys, "ledger", "prove", str(tenant), "--memory-id", "note-4", "--bundle", str(bundle),
        "--origin", ORIGIN,
    )  # fmt: skip
    assert code == 2 and "error: --bundle needs --origin and --key" in err


def test_bundle_to_stdout_without_witnesses(
    setup: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """`--bundle -` prints the bundle; without a cosigned checkpoint it carries a fresh one."""
    code, out, _ = run_main(
        capsys,
        "ledger",
        "prove",
        str(setup["tenant"]),
        "--memory-id",
        "note-0",
        "--bundle",
        "-",
        "--origin",
        ORIGIN,
        "--key",
        str(setup["log"]),
    )
    assert code == 0 and out.startswith("c2sp.org/tlog-proof@v1\n")
    assert out.split("\n\n", 1)[1].startswith(f"{ORIGIN}\n9\n")
    assert signer_from_key(setup["log"].read_text().strip()) == LOG


def _tree(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _tiles(setup: dict[str, Path], out_dir: Path, *extra: str) -> list[str]:
    return ["ledger", "tiles", str(setup["tenant"]), str(out_dir), *extra]


def test_tiles_refuse_another_origin_or_key_name(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On a folder published as ORIGIN, `ledger tiles` with another --origin, or with a key of
    another name, exits 1 and writes nothing (the checkpoint still names ORIGIN)."""
    out_dir = tmp_path / "public"
    assert (
        run_main(capsys, *_tiles(setup, out_dir, "--origin", ORIGIN, "--key", str(setup["log"])))[0]
        == 0
    )
    before = _tree(out_dir)
    Ledger(setup["tenant"] / "ledger.jsonl").append("note-9", f"{9:064x}", ts=1_700_000_100.0)
    code, out, err = run_main(
        capsys, *_tiles(setup, out_dir, "--origin", "other.example/x", "--key", str(setup["log"]))
    )
    assert (code, out) == (1, "")
    assert err == (
        f"error: {out_dir}: the published checkpoint is of log {ORIGIN!r}, not "
        "'other.example/x': another log's folder (nothing written)\n"
    )
    other = tmp_path / "other.key"
    other.write_text(HmacKey("other.example", bytes(range(32))).skey() + "\n")
    code, out, err = run_main(
        capsys, *_tiles(setup, out_dir, "--origin", ORIGIN, "--key", str(other))
    )
    assert (code, out) == (1, "")
    assert err == (
        f"error: {out_dir}: the published checkpoint is signed by example.com/agents, not by "
        "other.example: another log's key (nothing written)\n"
    )
    assert _tree(out_dir) == before


def test_tiles_recreate_missing_files_and_refuse_damaged_ones(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every run checks what the published checkpoint needs: a deleted tile and bundle are
    written again with their old bytes (also when the ledger grew since), a tile with a flipped
    byte is refused (exit 1, the file named, nothing written) until it is removed."""
    out_dir = tmp_path / "public"
    args = _tiles(setup, out_dir, "--origin", ORIGIN, "--key", str(setup["log"]))
    assert run_main(capsys, *args)[0] == 0
    before = _tree(out_dir)
    (out_dir / "tile/0/000.p/9").unlink()
    (out_dir / "tile/entries/000.p/9").unlink()
    code, out, err = run_main(capsys, *args, "--json")
    assert code == 0
    assert "0 files written" not in err and "2 files written (2 missing ones re-created)" in err
    document = json.loads(out)
    assert document["repaired"] == ["tile/0/000.p/9", "tile/entries/000.p/9"]
    assert document["written"] == ["tile/0/000.p/9", "tile/entries/000.p/9"]
    assert _tree(out_dir) == before

    tile = out_dir / "tile/0/000.p/9"
    data = bytearray(tile.read_bytes())
    data[40] ^= 1
    tile.write_bytes(bytes(data))
    Ledger(setup["tenant"] / "ledger.jsonl").append("note-9", f"{9:064x}", ts=1_700_000_100.0)
    damaged = _tree(out_dir)
    code, out, err = run_main(capsys, *args)
    assert (code, out) == (1, "")
    assert err == (
        "error: tile/0/000.p/9: the published file differs from the ledger's tree (its hashes "
        "differ from the ledger's); an immutable file is never rewritten: remove it and run "
        "again to have it re-created from the ledger (nothing written)\n"
    )
    assert _tree(out_dir) == damaged
    bundle = out_dir / "tile/entries/000.p/9"
    tile.unlink()
    bundle.write_bytes(bundle.read_bytes()[:-1])
    code, _, err = run_main(capsys, *args)
    assert (code, err) == (
        1,
        "error: tile/entries/000.p/9: the published file differs from the ledger's tree "
        "(it ends inside entry 9 of 9); an immutable file is never rewritten: remove it and "
        "run again to have it re-created from the ledger (nothing written)\n",
    )
    bundle.unlink()
    code, out, err = run_main(capsys, *args, "--json")
    assert code == 0
    document = json.loads(out)
    assert document["repaired"] == ["tile/0/000.p/9", "tile/entries/000.p/9"]
    assert document["written"] == [
        *document["repaired"],
        "tile/0/000.p/10",
        "tile/entries/000.p/10",
    ]
    assert (out_dir / "tile/0/000.p/9").read_bytes() == before["tile/0/000.p/9"]


def test_tiles_refuse_an_altered_bundle_entry_and_a_forged_checkpoint(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One hex digit changed inside a published bundle (its entry count unchanged): the next
    run refuses it, naming the bundle and the entry. A published checkpoint edited after it
    was signed (size 9 made 10) is refused for its bad signature first, before its size."""
    out_dir = tmp_path / "public"
    args = _tiles(setup, out_dir, "--origin", ORIGIN, "--key", str(setup["log"]))
    assert run_main(capsys, *args)[0] == 0
    bundle = out_dir / "tile/entries/000.p/9"
    good = bundle.read_bytes()
    digit = f"{4:064x}".encode()
    assert good.count(digit) == 1
    bundle.write_bytes(good.replace(digit, f"{5:064x}".encode()))
    code, out, err = run_main(capsys, *args)
    assert (code, out) == (1, "")
    assert err == (
        "error: tile/entries/000.p/9: the published file differs from the ledger's tree (entry "
        "4 is not the ledger's entry seq 5); an immutable file is never rewritten: remove it "
        "and run again to have it re-created from the ledger (nothing written)\n"
    )
    bundle.write_bytes(good)
    checkpoint = out_dir / "checkpoint"
    lines = checkpoint.read_text().split("\n")
    assert lines[1] == "9"
    checkpoint.write_text("\n".join([lines[0], "10", *lines[2:]]))
    code, out, err = run_main(capsys, *args)
    assert (code, out) == (1, "")
    assert err == (
        f"error: {out_dir}/checkpoint: the published checkpoint's signature does not verify "
        f"(invalid signature for key example.com/agents+{LOG.key_id:08x}): it was altered after "
        "it was signed; nothing written (if the tiles are this ledger's, remove it and run "
        "again)\n"
    )


def test_verify_tiles_names_the_tile_or_bundle_that_fails(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 300-entry log (tile/0/000 full, tile/0/001.p/44, tile/1/000.p/1): a flipped byte in
    the full tile names it and the parent hash it was checked against; in the right edge,
    the edge tiles and the checkpoint's root; a truncated bundle names the bundle and the
    entry it ends inside."""
    from merkle_memory.tlog.tiles import perfect_hash

    tenant = tmp_path / "big"
    tenant.mkdir()
    Ledger(tenant / "ledger.jsonl").append_many(
        [(f"m-{i}", f"{i:064x}") for i in range(300)], ts=1_700_000_000.0
    )
    out_dir = tmp_path / "public"
    key = str(setup["log"])
    assert run_main(capsys, "ledger", "tiles", str(tenant), str(out_dir), "--origin", ORIGIN,
                    "--key", key, "-q")[0] == 0  # fmt: skip
    verify = ("ledger", "verify-tiles", str(out_dir), "--key", key)

    full = out_dir / "tile/0/000"
    good = full.read_bytes()
    full.write_bytes(bytes([good[0] ^ 1]) + good[1:])
    parent = (out_dir / "tile/1/000.p/1").read_bytes()
    code, out, err = run_main(capsys, *verify)
    assert (code, out) == (1, "")
    assert err == (
        "error: tile/0/000 against its parent hash (hash 0 of tile/1/000.p/1): root mismatch: "
        f"expected {parent.hex()}, calculated {perfect_hash(full.read_bytes()).hex()}\n"
    )
    full.write_bytes(good)

    edge = out_dir / "tile/0/001.p/44"
    good = edge.read_bytes()
    edge.write_bytes(bytes([good[0] ^ 1]) + good[1:])
    root = json.loads(run_main(capsys, "ledger", "verify-checkpoint", str(out_dir / "checkpoint"),
                               "--key", key, "--json")[1])["root_hash"]  # fmt: skip
    code, out, err = run_main(capsys, *verify)
    assert (code, out) == (1, "")
    prefix = (
        "error: tile/1/000.p/1, tile/0/001.p/44 (the right edge) against the checkpoint's root: "
        f"root mismatch: expected {root}, calculated "
    )
    assert err.startswith(prefix) and len(err) == len(prefix) + 65
    edge.write_bytes(good)

    bundle = out_dir / "tile/entries/001.p/44"
    bundle.write_bytes(bundle.read_bytes()[:-1])
    code, out, err = run_main(capsys, *verify)
    assert (code, out, err) == (
        1, "", "error: tile/entries/001.p/44 ends inside entry 44 of 44\n"
    )  # fmt: skip


def _cli_keys(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, Path]:
    """An Ed25519 log key pair made by keygen."""
    key, vkey = tmp_path / "ed.key", tmp_path / "ed.vkey"
    code, out, _ = run_main(
        capsys, "ledger", "keygen", "--name", "example.com/agents", "--out", str(key)
    )
    assert code == 0
    vkey.write_text(out)
    return {"key": key, "vkey": vkey}


def test_witness_keys_are_refused_where_a_log_key_is_wanted(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cosigner (0x04) key as the log's key is refused by tiles, checkpoint, prove --bundle,
    witness (signer) and verify-checkpoint, verify-proof --bundle, witness serve --log
    (verifier); a private Ed25519 key where a verifier is wanted is refused too (an HMAC key,
    whose only form it is, is accepted: see test_witness_then_verify_checkpoint_with_a_quorum)."""
    tenant = str(setup["tenant"])
    ed = _cli_keys(tmp_path, capsys)
    signer_error = (  # the key file is named (cli._output.keys_from)
        f"error: {setup['w1']}: key 'w1.example' is a witness's cosigner key (type 0x04), not"
        " a log's key\n"
    )
    for argv in (
        _tiles(setup, tmp_path / "pub", "--origin", ORIGIN, "--key", str(setup["w1"])),
        ["ledger", "checkpoint", tenant, "--origin", ORIGIN, "--key", str(setup["w1"])],
        ["ledger", "prove", tenant, "--memory-id", "note-1", "--bundle", str(tmp_path / "b"),
         "--origin", ORIGIN, "--key", str(setup["w1"])],
        ["ledger", "witness", tenant, "--origin", ORIGIN, "--key", str(setup["w1"]),
         "--url", "http://127.0.0.1:9"],
    ):  # fmt: skip
        assert run_main(capsys, *argv) == (1, "", signer_error), argv
    assert not (tmp_path / "pub").exists() and not (tmp_path / "b").exists()

    code, note_text, _ = run_main(
        capsys, "ledger", "checkpoint", tenant, "--origin", ORIGIN, "--key", str(ed["key"])
    )
    assert code == 0
    checkpoint = tmp_path / "cc.note"
    checkpoint.write_text(note_text)
    bundle = tmp_path / "note-1.tlog-proof"
    assert run_main(
        capsys, "ledger", "prove", tenant, "--memory-id", "note-1", "--bundle", str(bundle),
        "--origin", ORIGIN, "--key", str(ed["key"]),
    )[0] == 0  # fmt: skip
    verify_checkpoint = ["ledger", "verify-checkpoint", str(checkpoint), "--key"]
    verify_bundle = ["ledger", "verify-proof", "--bundle", str(bundle), "--key"]
    assert run_main(capsys, *verify_checkpoint, str(ed["vkey"]))[0] == 0
    assert run_main(capsys, *verify_bundle, str(ed["vkey"]))[0] == 0
    verifier_error = (
        f"error: {setup['w2v']}: key 'w2.example' is a witness's cosigner key (type 0x04), not"
        " a log's key\n"
    )
    assert run_main(capsys, *verify_checkpoint, str(setup["w2v"])) == (1, "", verifier_error)
    assert run_main(capsys, *verify_bundle, str(setup["w2v"])) == (1, "", verifier_error)
    private_error = (
        f"error: {ed['key']}: key 'example.com/agents' is a private signer key (PRIVATE+KEY+...):"
        " give its verifier key (<name>+<id>+<base64>, printed by keygen) where a verifier key"
        " is wanted\n"
    )
    assert run_main(capsys, *verify_checkpoint, str(ed["key"])) == (1, "", private_error)
    assert run_main(capsys, *verify_bundle, str(ed["key"])) == (1, "", private_error)
    serve = ["witness", "serve", "--db", str(tmp_path / "w.db"), "--key", str(setup["w1"])]
    assert run_main(capsys, *serve, "--log", str(ed["key"])) == (1, "", private_error)
    assert run_main(capsys, *serve, "--log", str(setup["w2v"])) == (1, "", verifier_error)
    assert not (tmp_path / "w.db").exists()


def test_witness_serve_and_client_argument_errors(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A database that cannot be opened or is not SQLite is one `error:` line (exit 1); a port
    above 65535 and a --timeout that is not a finite number > 0 are usage errors (exit 2)."""
    (tmp_path / "log.vkey").write_text(LOG.skey() + "\n")
    serve = ["witness", "serve", "--key", str(setup["w1"]), "--log", str(tmp_path / "log.vkey")]
    missing = tmp_path / "no-such-dir" / "w.db"
    assert run_main(capsys, *serve, "--db", str(missing)) == (
        1, "", f"error: {missing}: witness database error: unable to open database file\n",
    )  # fmt: skip
    notadb = tmp_path / "notadb.file"
    notadb.write_bytes(b"this is not a database, just some text " * 100)
    assert run_main(capsys, *serve, "--db", str(notadb)) == (
        1, "", f"error: {notadb}: witness database error: file is not a database\n",
    )  # fmt: skip
    code, _, err = run_main(
        capsys, *serve, "--db", str(tmp_path / "w.db"), "--listen", "127.0.0.1:99999"
    )
    assert code == 2
    assert err.endswith("error: --listen '127.0.0.1:99999': port 99999 is not in 0..65535\n")
    code, _, err = run_main(capsys, *serve, "--db", str(tmp_path / "w.db"), "--listen", "localhost")
    assert code == 2 and err.endswith("error: --listen 'localhost' is not HOST:PORT\n")
    witness = ["ledger", "witness", str(setup["tenant"]), "--origin", ORIGIN, "--key",
               str(setup["log"]), "--url", "http://127.0.0.1:9"]  # fmt: skip
    for value in ("-1", "0", "nan", "inf", "1e309", "soon"):
        code, _, err = run_main(capsys, *witness, "--timeout", value)
        assert code == 2, value
        assert "argument --timeout: " in err and "Traceback" not in err


def test_quorum_without_witnesses_is_a_usage_error(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`verify-checkpoint --quorum 1` and `verify-proof --bundle --quorum 1` without --witness
    exit 2 with the usage."""
    note_file = tmp_path / "cc.note"
    note_file.write_text("x\n")
    code, _, err = run_main(
        capsys, "ledger", "verify-checkpoint", str(note_file), "--key", str(setup["log"]),
        "--quorum", "1",
    )  # fmt: skip
    assert code == 2 and err.startswith("usage: ")
    assert err.endswith("error: --quorum needs --witness keys\n")
    code, _, err = run_main(
        capsys, "ledger", "verify-proof", "--bundle", str(note_file), "--key", str(setup["log"]),
        "--quorum", "1",
    )  # fmt: skip
    assert code == 2 and err.endswith("error: --quorum needs --witness keys\n")


def test_a_bundle_without_its_final_newline(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bundle cut before its last newline is reported as such."""
    bundle = tmp_path / "b.tlog-proof"
    assert run_main(
        capsys, "ledger", "prove", str(setup["tenant"]), "--memory-id", "note-1", "--bundle",
        str(bundle), "--origin", ORIGIN, "--key", str(setup["log"]),
    )[0] == 0  # fmt: skip
    bundle.write_bytes(bundle.read_bytes()[:-1])
    code, out, err = run_main(
        capsys, "ledger", "verify-proof", "--bundle", str(bundle), "--key", str(setup["log"])
    )
    assert (code, out) == (1, "")
    assert err == (
        "error: the proof bundle's checkpoint: signed note does not end in a newline "
        "(a truncated file?)\n"
    )


class _NotAWitness(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def test_ledger_witness_against_a_plain_web_server(
    setup: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A web server that is no witness (HTML error page) is one clear line, not its body."""
    handler = functools.partial(_NotAWitness, directory=str(tmp_path))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        code, out, err = run_main(
            capsys, "ledger", "witness", str(setup["tenant"]), "--origin", ORIGIN, "--key",
            str(setup["log"]), "--url", url,
        )  # fmt: skip
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
    assert (code, out) == (1, "")
    assert err.endswith(
        f"\nerror: {url}/add-checkpoint: HTTP 501 Unsupported method ('POST'), answered as "
        "text/html: is this a C2SP tlog-witness's submission prefix?\n"
    )
    assert "<" not in err


def test_witness_and_bundle_of_a_database_tenant(
    setup: dict[str, Path],
    witness: str,
    postgres_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`ledger witness URL` keeps the cosigned checkpoint and the witness state as rows of
    the database tenant (printed note = row bytes; state `{URL: 9}`); `prove URL --bundle`
    carries that cosigned checkpoint, is the very bundle of the tenant exported to a folder,
    and verifies offline with the witness's key."""
    from merkle_memory.ledger import export_tenant, import_tenant

    url = postgres_url + "#cc"
    store = import_tenant(setup["tenant"], url).store
    base = ["--origin", ORIGIN, "--key", str(setup["log"]), "--url", witness]
    for _ in range(2):  # the second run starts from the size the state records
        code, out, err = run_main(
            capsys, "ledger", "witness", url, *base, "--witness-key", str(setup["w1v"])
        )
        assert (code, err) == (0, "")
        assert out.encode() == store.read_side_file("ledger.cosigned")
        assert store.read_side_file("ledger.witnesses") == f'{{"{witness}": 9}}\n'.encode()
    folder = export_tenant(url, tmp_path / "exported")
    assert (folder / "ledger.cosigned").read_text() == out
    prove = ["--memory-id", "note-4", "--bundle", "-", "--origin", ORIGIN, "--key"]
    bundles = []
    for where in (url, str(folder)):
        code, text, _err = run_main(capsys, "ledger", "prove", where, *prove, str(setup["log"]))
        assert code == 0 and text.startswith("c2sp.org/tlog-proof@v1\nextra ")
        bundles.append(text)
    assert bundles[0] == bundles[1]
    bundle = tmp_path / "note-4.tlog-proof"
    bundle.write_text(bundles[0])
    code, out, _ = run_main(
        capsys, "ledger", "verify-proof", "--bundle", str(bundle), "--key", str(setup["log"]),
        "--witness", str(setup["w1v"]), "--memory-id", "note-4",
    )  # fmt: skip
    assert code == 0 and out.endswith("; cosigned by 1 trusted witness\n")
