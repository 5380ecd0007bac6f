"""docs/FORMAT.md cannot drift: every worked example in it is recomputed with the library."""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from merkle_memory import canonical
from merkle_memory.errors import LedgerFormatError

DOC = Path(__file__).resolve().parents[1] / "docs" / "FORMAT.md"
FILE_ROLES = {"file", "head", "torn", "text", "note", "message", "bundle", "files", "tile-hex"}
_BLOCK = re.compile(r"^```(\w+) example=(\S+) (\S+)\n(.*?)\n```$", re.M | re.S)
_SUM = re.compile(r"^```console\n\$ (.*?)\n([0-9a-f]{64})  -\n```$", re.M)

EXPECTED_EXAMPLES = {
    "canon-1",
    "node-1",
    "node-2",
    "record-1",
    "entry-1",
    "entry-3",
    "ledger-1",
    "torn-1",
    "memory-1",
    "leaf-1",
    "tree-1",
    "sidecar-1",
    "checkpoint-1",
    "testimony-1",
    "record-mnemo-1",
    "record-salted-1",
    "tombstone-1",
    "entry-forget",
    "memory-salted-1",
    "cosignature-1",
    "tiles-1",
    "bundle-1",
}


def _examples() -> dict[str, dict[str, str]]:
    """Every ``example=<name> <role>`` block of FORMAT.md, file roles with their final newline."""
    out: dict[str, dict[str, str]] = {}
    for match in _BLOCK.finditer(DOC.read_text(encoding="utf-8")):
        _lang, name, role, text = match.groups()
        roles = out.setdefault(name, {})
        assert role not in roles, f"{name} {role} appears twice"
        roles[role] = text + "\n" if role in FILE_ROLES else text
    return out


EXAMPLES = _examples()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_every_expected_example_is_present() -> None:
    """FORMAT.md holds exactly the worked examples this test knows how to check."""
    assert set(EXAMPLES) == EXPECTED_EXAMPLES


def test_sha256sum_commands_print_what_the_doc_says() -> None:
    """Each `printf ... | sha256sum` command shown gives the hash printed under it."""
    commands = _SUM.findall(DOC.read_text(encoding="utf-8"))
    assert len(commands) == 13
    for command, expected in commands:
        plain = re.fullmatch(r"printf '%s' '([^']*)' \| sha256sum", command)
        leaf = re.fullmatch(r"\(printf '\\0'; printf '%s' '([^']*)'\) \| sha256sum", command)
        salted = re.fullmatch(
            r"\{ printf '%s' ([0-9a-f]{64}) \| xxd -r -p; printf '%s' '([^']*)'; \} \| sha256sum",
            command,
        )
        if plain is not None:
            data = plain.group(1).encode()
        elif salted is not None:
            data = bytes.fromhex(salted.group(1)) + salted.group(2).encode()
        else:
            assert leaf is not None, command
            data = b"\x00" + leaf.group(1).encode()
        assert _sha(data) == expected, command


def test_canonical_example() -> None:
    """Section 1: canonical bytes and digest of the input text."""
    ex = EXAMPLES["canon-1"]
    value = canonical.loads(ex["input"])
    assert canonical.dumps(value) == ex["bytes"].encode()
    assert canonical.digest(value) == ex["sha256"] == _sha(ex["bytes"].encode())


def test_node_examples() -> None:
    """Section 2: node preimages and hashes through dag.node_hash, child naming its parent."""
    dag = importlib.import_module("merkle_memory.dag")
    for name in ("node-1", "node-2"):
        ex = EXAMPLES[name]
        given = json.loads(ex["input"])
        bucket = dag.Bucket.from_dict(given["bucket"])
        preimage = {"parent": given["parent"] or "", "content": bucket.hashed_content()}
        assert canonical.dumps(preimage) == ex["preimage"].encode()
        assert dag.node_hash(bucket, given["parent"]) == ex["sha256"]
        assert _sha(ex["preimage"].encode()) == ex["sha256"]
    assert json.loads(EXAMPLES["node-2"]["input"])["parent"] == EXAMPLES["node-1"]["sha256"]


def test_record_example() -> None:
    """Section 3: testimony preimage over the default sealed fields, and its digest."""
    records = importlib.import_module("merkle_memory.ledger.records")
    ex = EXAMPLES["record-1"]
    record = json.loads(ex["input"])
    sealed = {f: record.get(f) for f in records.DEFAULT_SEALED_FIELDS}
    assert canonical.dumps(sealed) == ex["preimage"].encode()
    assert records.testimony(record) == ex["sha256"]


def test_entry_examples_and_both_hash_forms() -> None:
    """Section 4.1/4.2: entry hash, line bytes, and the anchor form accepted on read."""
    ledger = importlib.import_module("merkle_memory.ledger")
    for name in ("entry-1", "entry-3"):
        ex = EXAMPLES[name]
        body = json.loads(ex["input"])
        entry = ledger.Entry.create(**body)
        assert canonical.dumps(entry.body()) == ex["preimage"].encode()
        assert entry.hash == ex["sha256"]
        if "line" in ex:
            assert entry.line() == ex["line"].encode()
    ex = EXAMPLES["entry-3"]
    body = json.loads(ex["input"])
    anchor = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert anchor == ex["anchor-preimage"]
    assert _sha(anchor.encode()) == ex["anchor-sha256"] != ex["sha256"]
    accepted = ledger.Entry.from_dict({**body, "hash": ex["anchor-sha256"]})
    assert accepted.hash == ex["anchor-sha256"]
    with pytest.raises(LedgerFormatError):
        ledger.Entry.from_dict({**body, "hash": "0" * 64})


def _write_ledger(tmp_path: Path) -> Any:
    """Append the three entries of section 4.3 with the documented ts, op and testimonies."""
    ledger = importlib.import_module("merkle_memory.ledger")
    led = ledger.Ledger(tmp_path / "ledger.jsonl")
    for line in EXAMPLES["ledger-1"]["file"].splitlines():
        entry = json.loads(line)
        led.append(entry["memory_id"], entry["content_sha256"], op=entry["op"], ts=entry["ts"])
    return led


def test_ledger_file_and_head(tmp_path: Path) -> None:
    """Section 4.3: a ledger written by Ledger.append is byte-identical to the doc; its head
    is two 4,096-byte slots, slot 0 holding the documented line (but the fingerprint, which
    is the file's own ``dev:ino:size:mtime_ns:ctime_ns``, and so the check) and the documented
    body's SHA-256 as ``check``."""
    _write_ledger(tmp_path)
    ex = EXAMPLES["ledger-1"]
    assert (tmp_path / "ledger.jsonl").read_text(encoding="utf-8") == ex["file"]
    body, slot = ex["head-body"].encode(), ex["head-slot"].encode()
    assert json.loads(slot) == json.loads(body) | {"check": _sha(body)}
    assert canonical.dumps(json.loads(slot)) == slot and len(slot) == 278
    head = (tmp_path / "ledger.head").read_bytes()
    cut = head.index(b"\n")  # 278 with the documented fingerprint
    assert len(head) == 8192 and head[cut:4096] == b"\n" + bytes(4095 - cut)
    written = json.loads(head[:cut])
    documented = json.loads(body)["fingerprint"]
    st = (tmp_path / "ledger.jsonl").stat()
    stamp = f"{st.st_dev}:{st.st_ino}:867:{st.st_mtime_ns}:{st.st_ctime_ns}"
    assert written["fingerprint"] == stamp
    assert re.fullmatch(r"\d+:\d+:867:\d+:\d+", documented)
    ours = json.loads(body) | {"fingerprint": written["fingerprint"]}
    assert head[:cut] == canonical.dumps(ours | {"check": _sha(canonical.dumps(ours))})
    assert json.loads(head[4096:].rstrip(b"\0"))["counter"] == 2  # slot 1: the second append
    lines = ex["file"].splitlines()
    assert lines[0] == EXAMPLES["entry-1"]["line"]
    assert json.loads(lines[2])["hash"] == EXAMPLES["entry-3"]["sha256"]


def test_torn_file(tmp_path: Path) -> None:
    """Section 4.4: recover moves the fragment to ledger.torn under the documented header."""
    led = _write_ledger(tmp_path)
    ex = EXAMPLES["torn-1"]
    header, fragment, rest = ex["torn"].split("\n", 2)
    assert rest == ""
    size = (tmp_path / "ledger.jsonl").stat().st_size
    assert re.fullmatch(rf"# quarantined \d+\.\d{{3}} from offset {size}", header)
    with open(tmp_path / "ledger.jsonl", "ab") as handle:
        handle.write(fragment.encode())
    led.recover()
    torn = (tmp_path / "ledger.torn").read_text(encoding="utf-8")
    got_header, got_fragment, got_rest = torn.split("\n", 2)
    assert re.fullmatch(rf"# quarantined \d+\.\d{{3}} from offset {size}", got_header)
    assert (got_fragment, got_rest) == (fragment, "")
    assert (tmp_path / "ledger.jsonl").read_text(encoding="utf-8") == EXAMPLES["ledger-1"]["file"]


def test_memory_example() -> None:
    """Section 5: memory id preimage, id, file name and file bytes."""
    memory = importlib.import_module("merkle_memory.bank.memory")
    ex = EXAMPLES["memory-1"]
    fields = json.loads(ex["input"])
    fields["timestamp"] = datetime.fromisoformat(fields["timestamp"])
    m = memory.Memory(**fields)
    assert canonical.dumps(m.hashed_dict()) == ex["preimage"].encode()
    assert m.id == ex["sha256"] == _sha(ex["preimage"].encode())
    assert m.file_name == ex["file-name"]
    assert m.to_bytes() == ex["file"].encode()


def test_leaf_and_tree_examples() -> None:
    """Section 6: leaf data is the entry line; leaf hashes, node and root by RFC 6962."""
    rfc6962 = importlib.import_module("merkle_memory.rfc6962")
    ex, tree = EXAMPLES["leaf-1"], EXAMPLES["tree-1"]
    assert ex["data"] == EXAMPLES["entry-1"]["line"]
    assert rfc6962.hash_leaf(ex["data"].encode()).hex() == ex["leaf-hash"]
    assert _sha(b"\x00" + ex["data"].encode()) == ex["leaf-hash"]
    lines = EXAMPLES["ledger-1"]["file"].splitlines()
    leaves = [rfc6962.hash_leaf(line.encode()) for line in lines]
    assert "\n".join(h.hex() for h in leaves) == tree["leaf-hashes"]
    node = rfc6962.hash_children(leaves[0], leaves[1])
    assert node.hex() == tree["node-01"] == _sha(b"\x01" + leaves[0] + leaves[1])
    root = rfc6962.hash_children(node, leaves[2])
    assert root.hex() == tree["root"] == rfc6962.root(leaves).hex()


def test_sidecar_example(tmp_path: Path) -> None:
    """Section 7: the sidecar of the three-entry ledger holds the documented hashes in order."""
    treelog = importlib.import_module("merkle_memory.ledger.treelog")
    lines = [line.encode() for line in EXAMPLES["ledger-1"]["file"].splitlines()]
    treelog.TreeLog.rebuild(tmp_path / "ledger.tree", lines)
    data = (tmp_path / "ledger.tree").read_bytes()
    hexes = [data[i : i + 32].hex() for i in range(0, len(data), 32)]
    assert "\n".join(hexes) == EXAMPLES["sidecar-1"]["hex"]
    assert len(hexes) == treelog.node_count(3) == 4


def test_checkpoint_example() -> None:
    """Section 8: checkpoint text and its HMAC signed note, signed and verified by the code."""
    checkpoint = importlib.import_module("merkle_memory.checkpoint")
    signed_note = importlib.import_module("merkle_memory.signed_note")
    ex = EXAMPLES["checkpoint-1"]
    key = signed_note.signer_from_key(ex["key"])
    assert key.secret == bytes(range(32))
    root = bytes.fromhex(EXAMPLES["tree-1"]["root"])
    cp = checkpoint.Checkpoint("example.com/agents/rocky", 3, root)
    assert cp.to_text() == ex["text"]
    assert checkpoint.sign_checkpoint(cp, [key]) == ex["note"]
    assert checkpoint.open_checkpoint(ex["note"], [key]) == cp
    signature_line = ex["note"].rsplit("\n", 2)[1]
    raw = base64.b64decode(signature_line.rsplit(" ", 1)[1])
    assert raw[:4] == bytes.fromhex("6d5e373f")
    import hmac

    assert raw[4:] == hmac.new(bytes(range(32)), ex["text"].encode(), "sha256").digest()


def test_testimony_mode_examples(tmp_path: Path) -> None:
    """Section 3.1: testimony.json bytes; the mnemo testimony of a record read back from its
    file; the salted testimony of a record holding its salt."""
    records = importlib.import_module("merkle_memory.ledger.records")
    tenant_mod = importlib.import_module("merkle_memory.ledger.tenant")
    tenant = tenant_mod.Tenant(tmp_path / "t", testimony="salted")
    tenant.initialize()
    assert (tmp_path / "t" / "testimony.json").read_text(encoding="utf-8") == (
        EXAMPLES["testimony-1"]["file"]
    )
    ex = EXAMPLES["record-mnemo-1"]
    record = json.loads(ex["input"])
    _written, digest = records.record_to_seal(record, mode="mnemo")
    sealed = {f: record.get(f) for f in records.DEFAULT_SEALED_FIELDS}
    anchor = json.dumps(sealed, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert anchor == ex["preimage"] and digest == ex["sha256"] == _sha(anchor.encode())
    ex = EXAMPLES["record-salted-1"]
    salted = {"id": "card", "summary": "my card ends in 4242", "testimony_salt": ex["salt"]}
    sealed = {f: salted.get(f) for f in records.DEFAULT_SEALED_FIELDS}
    assert canonical.dumps(sealed) == ex["bytes"].encode()
    assert records.testimony(salted, mode="salted") == ex["sha256"]
    assert _sha(bytes.fromhex(ex["salt"]) + ex["bytes"].encode()) == ex["sha256"]


def test_tombstone_and_forget_entry_examples() -> None:
    """Section 4.5: the tombstone file retires the salted testimony of section 3.1, its
    digest is the forget entry's content_sha256, and the entry continues the ledger of 4.3."""
    tombstones = importlib.import_module("merkle_memory.ledger.tombstones")
    ledger = importlib.import_module("merkle_memory.ledger")
    ex = EXAMPLES["tombstone-1"]
    tomb = tombstones.Tombstone.from_bytes(ex["file"].encode())
    assert tomb.to_bytes() == ex["file"].encode()
    assert tomb.retires == EXAMPLES["record-salted-1"]["sha256"]
    assert tomb.digest() == ex["sha256"]
    entry_ex = EXAMPLES["entry-forget"]
    body = json.loads(entry_ex["input"])
    assert body["content_sha256"] == ex["sha256"]
    assert body["prev"] == EXAMPLES["entry-3"]["sha256"]
    entry = ledger.Entry.create(**body)
    assert entry.hash == entry_ex["sha256"] and entry.line() == entry_ex["line"].encode()


def test_salted_memory_example() -> None:
    """Section 5.3: a salted memory's id and file (salt 32 bytes of 0x5b)."""
    memory = importlib.import_module("merkle_memory.bank.memory")
    ex = EXAMPLES["memory-salted-1"]
    stamp = datetime.fromisoformat("2026-05-29T12:00:00+00:00")
    plain = memory.Memory("fact", "user", "my card ends in 4242", timestamp=stamp)
    assert plain.id == "6fdbec25ce4d21ce233f729faca9722ac8147d01a8330e67f7bb2b23a9d3f3bf"
    salted = plain.salted("5b" * 32)
    assert salted.id == ex["sha256"]
    assert salted.to_bytes() == ex["file"].encode()


def test_cosignature_example() -> None:
    """Section 8: the cosignature/v1 message and the cosigned note, signed by the code with the
    RFC 8032 TEST 1 key at the documented time, and its key ID and timestamp as described."""
    pytest.importorskip("cryptography", reason="Ed25519 needs the optional extra 'ed25519'")
    signed_note = importlib.import_module("merkle_memory.signed_note")
    checkpoint = importlib.import_module("merkle_memory.checkpoint")
    ex = EXAMPLES["cosignature-1"]
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    witness = signed_note.CosignatureSigner("witness.example/w1", seed, 1789851300)
    assert witness.verifier().vkey() == ex["key"]
    text = EXAMPLES["checkpoint-1"]["text"]
    assert signed_note.cosignature_message(text.encode(), 1789851300).decode() == ex["message"]
    lines = signed_note.sign_note(text, [witness]).split("\n\n", 1)[1]
    assert checkpoint.add_cosignatures(EXAMPLES["checkpoint-1"]["note"], lines) == ex["note"]
    raw = base64.b64decode(ex["note"].splitlines()[-1].rsplit(" ", 1)[1])
    assert raw[:4].hex() == "eb762cc2" and raw[4:12].hex() == "000000006aaef6a4"


def test_tiles_example(tmp_path: Path) -> None:
    """Section 9: the three-entry ledger's tiles are the documented files, the level-0 tile
    holds its leaf hashes and the bundle its lines, each behind a uint16 length."""
    tlog = importlib.import_module("merkle_memory.tlog")
    lines = [line.encode() for line in EXAMPLES["ledger-1"]["file"].splitlines()]
    rfc6962 = importlib.import_module("merkle_memory.rfc6962")
    leaves = [rfc6962.hash_leaf(line) for line in lines]
    report = tlog.write_tiles(
        tmp_path, EXAMPLES["checkpoint-1"]["note"], leaves, lambda s, e: lines[s:e]
    )
    assert "".join(p + "\n" for p in report.written) == EXAMPLES["tiles-1"]["files"]
    tile = (tmp_path / "tile/0/000.p/3").read_bytes()
    hexes = "".join(tile[i : i + 32].hex() + "\n" for i in range(0, 96, 32))
    assert hexes == EXAMPLES["tiles-1"]["tile-hex"]
    bundle = (tmp_path / "tile/entries/000.p/3").read_bytes()
    assert bundle == b"".join(len(line).to_bytes(2, "big") + line for line in lines)


def test_bundle_example() -> None:
    """Section 10: the bundle of entry 2 is what the code writes, and it verifies."""
    tlog = importlib.import_module("merkle_memory.tlog")
    proof = importlib.import_module("merkle_memory.proof")
    rfc6962 = importlib.import_module("merkle_memory.rfc6962")
    signed_note = importlib.import_module("merkle_memory.signed_note")
    lines = [line.encode() for line in EXAMPLES["ledger-1"]["file"].splitlines()]
    leaves = [rfc6962.hash_leaf(line) for line in lines]
    made = tlog.ProofBundle(
        1, tuple(proof.inclusion_proof(1, 3, leaves)), EXAMPLES["checkpoint-1"]["note"], lines[1]
    )
    assert made.to_text() == EXAMPLES["bundle-1"]["bundle"]
    key = signed_note.signer_from_key(EXAMPLES["checkpoint-1"]["key"])
    checkpoint, entry = tlog.verify_ledger_bundle(
        tlog.ProofBundle.from_text(EXAMPLES["bundle-1"]["bundle"]), [key]
    )
    assert (checkpoint.size, entry.seq) == (3, 2)
    assert made.proof == (leaves[0], leaves[2])
