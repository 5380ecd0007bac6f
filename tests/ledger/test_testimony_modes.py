"""Testimony modes (issue 16 item 8, issue 20 item 2): exact mnemo testimony, salted testimony
(crypto-shredding), and the one place a tenant's mode is recorded (``testimony.json``, else
implied by the ledger's first line)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest
from support import SEALED_FIELDS, mnemo_canonical, mnemo_verify

from merkle_memory import canonical
from merkle_memory.errors import LedgerFormatError, RecordError, StoreFileError, TenantError
from merkle_memory.ledger import Tenant
from merkle_memory.ledger.records import (
    SALT_FIELD,
    mnemo_digest,
    record_to_seal,
    salted_digest,
)
from merkle_memory.ledger.records import testimony as record_testimony
from merkle_memory.ledger.records import testimony_forms as forms_of
from merkle_memory.ledger.settings import (
    implied_testimony_mode,
    ledger_testimony_mode,
    read_testimony_mode,
)

ASTRAL = "\U0001d11e clef"  # a key above U+FFFF: sorted differently by UTF-16 and code points
VALUES: dict[str, Any] = {
    "one-point-zero": 1.0,
    "two-point-five": 2.5,
    "tiny": 1e-7,
    "huge": 1e21,
    "astral": {ASTRAL: 1, "z": 2, "\uffff": 3},
    "big-integer": 2**64 + 1,
}


def _sealed(record: dict[str, Any]) -> dict[str, Any]:
    return {f: record.get(f) for f in SEALED_FIELDS}


def _naive_mnemo(record: dict[str, Any]) -> str:
    """mnemo-cortex's ``content_hash``, written out."""
    return hashlib.sha256(mnemo_canonical(_sealed(record))).hexdigest()


def _records() -> list[dict[str, Any]]:
    out = [{"id": name, "summary": name, "key_facts": [value]} for name, value in VALUES.items()]
    out.append({"id": "all", "summary": "all", "decisions_made": VALUES, "key_facts": [1.0]})
    return out


def _lines(tenant: Tenant) -> list[dict[str, Any]]:
    text = (tenant.root / "ledger.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def _anchor_tenant(root: Path) -> Path:
    """A tenant as mnemo-cortex writes it: indented records, anchor-form ledger lines."""
    memory = root / "memory"
    memory.mkdir(parents=True)
    prev = "0" * 64
    lines = []
    for seq, rid in enumerate(("a", "b"), 1):
        record = {"id": rid, "summary": rid, "key_facts": [1.0]}
        (memory / f"{rid}.json").write_text(json.dumps(record, indent=2, ensure_ascii=False))
        entry: dict[str, Any] = {
            "seq": seq,
            "ts": 1789851200.0 + seq,
            "op": "save",
            "memory_id": rid,
            "content_sha256": _naive_mnemo(record),
            "prev": prev,
        }
        entry["hash"] = hashlib.sha256(mnemo_canonical(entry)).hexdigest()
        prev = entry["hash"]
        lines.append(json.dumps(entry, ensure_ascii=False) + "\n")
    (root / "ledger.jsonl").write_text("".join(lines), encoding="utf-8")
    return root


# --- mnemo mode ------------------------------------------------------------------------------


def test_a_mnemo_ledger_verifies_under_the_anchors_formulas(tmp_path: Path) -> None:
    """Acceptance (issue 16 item 8): a tenant in mnemo mode seals records holding 1.0, 2.5,
    1e-7, 1e21, an astral key and an integer beyond 2**53; a naive implementation of the
    anchor's verify (entry hashes and testimony by ``json.dumps(sort_keys, compact,
    ensure_ascii=False)``) calls every one sealed, and so does this library's verify."""
    tenant = Tenant(tmp_path / "t", testimony="mnemo")
    records = _records()
    for record in records:
        tenant.save(record)
    assert mnemo_verify(tenant.root) == {
        "ok": True,
        "chain": "intact",
        "entries": 7,
        "sealed": 7,
        "altered": [],
        "missing": [],
        "unsealed": [],
    }
    for line, record in zip(_lines(tenant), records, strict=True):
        assert line["content_sha256"] == _naive_mnemo(record)
    report = tenant.verify()
    assert (report.ok, report.sealed) == (True, 7)
    assert (tenant.root / "testimony.json").read_bytes() == (
        b'{"schema":"merkle-memory/testimony/1","testimony":"mnemo"}\n'
    )


def test_the_default_mode_is_rfc8785_and_mnemo_calls_those_values_altered(tmp_path: Path) -> None:
    """Why the mode exists: in the default mode (unchanged digests, no testimony.json) the
    anchor's verifier calls the records holding 1.0, 1e-7, 1e21 or an astral key altered
    (2.5 and 1e21, written ``1e+21`` by both, agree), and an integer beyond 2**53 is
    refused."""
    tenant = Tenant(tmp_path / "t")
    for record in _records():
        if record["id"] in ("big-integer", "all"):
            with pytest.raises(RecordError, match="cannot be canonicalized"):
                tenant.save(record)
            continue
        entry = tenant.save(record)
        assert entry.content_sha256 == canonical.digest(_sealed(record))
    assert mnemo_verify(tenant.root)["altered"] == ["astral", "one-point-zero", "tiny"]
    assert tenant.verify().ok
    assert not (tenant.root / "testimony.json").exists()
    assert tenant.testimony_mode == "rfc8785"


def test_a_tenant_mnemo_cortex_started_is_sealed_in_mnemo_mode(tmp_path: Path) -> None:
    """Chosen automatically: a ledger whose first line is in the anchor's form implies mnemo
    mode (nothing is written to record it); this library's saves and adoptions then seal the
    anchor's digest, so mnemo-cortex's verifier keeps agreeing, even after this library's
    own RFC 8785 lines follow."""
    root = _anchor_tenant(tmp_path / "t")
    tenant = Tenant(root)
    assert tenant.testimony_mode == "mnemo"
    tenant.save({"id": "c", "summary": "c", "key_facts": [1.0, 1e21]})
    (root / "memory" / "d.json").write_text(json.dumps({"id": "d", "key_facts": [1e-7]}))
    assert tenant.seal().sealed_ids == ("d",)
    assert Tenant(root).testimony_mode == "mnemo"  # our lines follow; the first one decides
    assert not (root / "testimony.json").exists()
    assert mnemo_verify(root)["ok"] is True
    assert mnemo_verify(root)["sealed"] == 4
    assert Tenant(root).verify().sealed == 4


def test_an_explicit_mode_beats_the_implied_one_and_is_recorded(tmp_path: Path) -> None:
    """``testimony="rfc8785"`` on a mnemo-cortex tenant is recorded and used: the next save
    seals the RFC 8785 digest (verify still accepts both forms)."""
    root = _anchor_tenant(tmp_path / "t")
    entry = Tenant(root, testimony="rfc8785").save({"id": "c", "key_facts": [1.0]})
    assert entry.content_sha256 == canonical.digest(_sealed({"id": "c", "key_facts": [1.0]}))
    assert read_testimony_mode(root) == "rfc8785"
    assert Tenant(root).testimony_mode == "rfc8785"
    assert Tenant(root).verify().ok


def test_mnemo_testimony_hashes_the_record_as_written(tmp_path: Path) -> None:
    """``record_to_seal`` in mnemo mode hashes what the file will hold: a tuple is a list,
    and the digest equals the naive formula over the file read back with ``json``."""
    record = {"id": "t", "key_facts": (1.0, 2**60), "decisions_made": {"\U0001f600": 1e-7}}
    written, digest = record_to_seal(record, mode="mnemo")
    tenant = Tenant(tmp_path / "t", testimony="mnemo")
    tenant.save(record)
    on_disk = json.loads((tenant.memory_dir / "t.json").read_text(encoding="utf-8"))
    assert digest == _naive_mnemo(on_disk) == mnemo_digest(_sealed(on_disk))
    assert written == record
    assert record_testimony(on_disk, mode="mnemo") == digest
    assert digest in forms_of(on_disk, mode="mnemo")


def test_mnemo_mode_refuses_what_has_no_utf8_json_form() -> None:
    """NaN, a lone surrogate and a value with no JSON form are refused, never stringified."""
    for bad in (float("nan"), "\ud800", {1, 2}):
        with pytest.raises(RecordError):
            record_to_seal({"id": "x", "summary": bad}, mode="mnemo")


# --- salted mode -----------------------------------------------------------------------------


def test_salted_records_seal_the_salted_digest(tmp_path: Path) -> None:
    """A salted tenant records its mode, writes a fresh 32-byte salt into each record file
    (never the same twice, even for the same content), and seals SHA-256(salt || RFC 8785
    bytes); verify says sealed."""
    tenant = Tenant(tmp_path / "t", testimony="salted")
    first = tenant.save({"id": "x", "summary": "same"})
    data = json.loads((tenant.memory_dir / "x.json").read_text())
    salt = data[SALT_FIELD]
    assert len(salt) == 64 and int(salt, 16) >= 0
    preimage = bytes.fromhex(salt) + canonical.dumps(_sealed({"id": "x", "summary": "same"}))
    assert first.content_sha256 == hashlib.sha256(preimage).hexdigest()
    assert first.content_sha256 == salted_digest(salt, _sealed(data))
    second = tenant.save({"id": "x", "summary": "same", SALT_FIELD: salt})
    assert second.content_sha256 != first.content_sha256
    assert json.loads((tenant.memory_dir / "x.json").read_text())[SALT_FIELD] != salt
    assert (tenant.root / "testimony.json").read_bytes() == (
        b'{"schema":"merkle-memory/testimony/1","testimony":"salted"}\n'
    )
    report = tenant.verify()
    assert (report.ok, report.sealed) == (True, 1)


def test_salted_records_detect_edits_of_the_content_and_of_the_salt(tmp_path: Path) -> None:
    """Changing a sealed field or the salt makes the record altered; a filing field may
    change; the plain digests of a salted record are not accepted."""
    tenant = Tenant(tmp_path / "t", testimony="salted")
    tenant.save({"id": "x", "summary": "s"})
    path = tenant.memory_dir / "x.json"
    original = json.loads(path.read_text())
    for change, verdict in (
        ({"category": "filed"}, "sealed"),
        ({"summary": "t"}, "altered"),
        ({SALT_FIELD: "0" * 64}, "altered"),
        ({SALT_FIELD: "not hex"}, "altered"),
    ):
        path.write_text(json.dumps({**original, **change}))
        report = tenant.verify()
        assert ("altered" if report.altered else "sealed") == verdict, change
    path.write_text(json.dumps({k: v for k, v in original.items() if k != SALT_FIELD}))
    assert tenant.verify().altered == ("x",)


def test_after_forgetting_no_brute_force_recovers_salted_content(tmp_path: Path) -> None:
    """Acceptance (issue 20 item 2): after a salted record is forgotten, no candidate of a
    small set (every 'my card ends in NNNN') matches any digest the tenant still holds, in
    any form this library or the anchor computes, and the salt is nowhere on disk; the same
    brute force finds the unsalted record's content (the control)."""
    candidates = [f"my card ends in {n:04d}" for n in range(10_000)]

    def guesses(text: str) -> set[str]:
        record = {"id": "card", "summary": text}
        return set(forms_of(record)) | {_naive_mnemo(record)}

    def held(tenant: Tenant) -> bytes:
        return b"".join(p.read_bytes() for p in sorted(tenant.root.rglob("*")) if p.is_file())

    found = {}
    for mode in ("salted", "rfc8785"):
        tenant = Tenant(tmp_path / mode, testimony=mode)
        tenant.save({"id": "card", "summary": "my card ends in 4242"})
        salt = json.loads((tenant.memory_dir / "card.json").read_text()).get(SALT_FIELD)
        tenant.forget("card", "user asked")
        assert tenant.verify().forgotten == ("card",)
        disk = held(tenant)
        assert b"ends in 4242" not in disk  # (a hex digest may hold "4242" by chance)
        if salt is not None:
            assert salt.encode() not in disk
        digests = {line["content_sha256"] for line in _lines(tenant)}
        tomb = tenant.tombstone("card")
        assert tomb is not None
        digests.add(tomb.retires)
        found[mode] = [c for c in candidates if guesses(c) & digests]
    assert found == {"salted": [], "rfc8785": ["my card ends in 4242"]}


def test_a_salted_tenant_stays_salted_and_one_with_entries_cannot_become_salted(
    tmp_path: Path,
) -> None:
    """Asking a salted tenant for another mode is refused before anything is written; so is
    making a tenant whose ledger holds entries salted (its plain digests could never be
    unlinked): ``TenantError``, no ``testimony.json``; an empty tenant may become salted."""
    salted = Tenant(tmp_path / "s", testimony="salted")
    salted.save({"id": "x", "summary": "x"})
    before = sorted(p.name for p in salted.memory_dir.iterdir())
    with pytest.raises(TenantError, match="cannot change to 'rfc8785'"):
        Tenant(salted.root, testimony="rfc8785").save({"id": "y", "summary": "y"})
    assert sorted(p.name for p in salted.memory_dir.iterdir()) == before
    plain = Tenant(tmp_path / "p")
    plain.save({"id": "old", "summary": "old"})
    ledger = (plain.root / "ledger.jsonl").read_bytes()
    message = (
        "the ledger already holds entries with plain digests, which salting cannot unlink "
        "from their content; a salted tenant starts empty: make a new tenant with --salted "
        "(testimony='salted') and save the records into it"
    )
    for act in (
        lambda t: t.initialize(),
        lambda t: t.save({"id": "new", "summary": "new"}),
    ):
        with pytest.raises(TenantError) as info:
            act(Tenant(plain.root, testimony="salted"))
        assert (info.value.reason, info.value.path) == (message, str(plain.root))
    assert (plain.root / "ledger.jsonl").read_bytes() == ledger
    assert not (plain.root / "testimony.json").exists()
    assert sorted(p.name for p in plain.memory_dir.iterdir()) == ["old.json"]
    assert plain.testimony_mode == "rfc8785"
    empty = Tenant(tmp_path / "e")
    empty.initialize()
    assert Tenant(empty.root, testimony="salted").initialize() == "salted"


def test_seal_adopts_salted_records_and_skips_unsalted_ones_of_a_salted_tenant(
    tmp_path: Path,
) -> None:
    """A salted record whose line a crash lost is adopted with its salted digest; a record
    written without a salt (by another tool) is skipped with the reason (its plain digest
    would stay brute-forceable), nothing of it enters the ledger, and saving it salts it."""
    tenant = Tenant(tmp_path / "t", testimony="salted")
    tenant.save({"id": "x", "summary": "x"})
    salt = "ab" * 32
    (tenant.memory_dir / "s.json").write_text(json.dumps({"id": "s", SALT_FIELD: salt}))
    (tenant.memory_dir / "u.json").write_text(json.dumps({"id": "u", "summary": "4242"}))
    result = tenant.seal()
    assert (result.sealed_ids, result.skipped) == (("s",), ("u",))
    assert result.skip_reasons == (
        (
            "u",
            "no testimony_salt in a salted tenant: sealing its plain digest would let the "
            "content be guessed from the ledger once the file is gone; save it (merkle-memory "
            "ledger save) to salt and seal it",
        ),
    )
    by_id = {line["memory_id"]: line["content_sha256"] for line in _lines(tenant)}
    assert by_id == {"x": by_id["x"], "s": salted_digest(salt, _sealed({"id": "s"}))}
    plain = canonical.digest(_sealed({"id": "u", "summary": "4242"}))
    assert plain.encode() not in (tenant.root / "ledger.jsonl").read_bytes()
    assert (tenant.verify().sealed, tenant.verify().unsealed) == (2, ("u",))
    tenant.save(json.loads((tenant.memory_dir / "u.json").read_text()))
    assert SALT_FIELD in json.loads((tenant.memory_dir / "u.json").read_text())
    assert (tenant.verify().ok, tenant.verify().sealed, tenant.verify().unsealed) == (True, 3, ())


def test_forgetting_an_unsalted_record_of_a_salted_tenant_leaves_no_plain_digest(
    tmp_path: Path,
) -> None:
    """Trial (HIGH 4a): a hand-written record with no salt in a salted tenant, forgotten
    unsealed: the tombstone retires a digest under a throwaway salt, so the brute force over
    the 10,000 candidates finds nothing in the ledger, the tombstone or any file."""
    candidates = [f"my card ends in {n:04d}" for n in range(10_000)]

    def guesses(text: str) -> set[str]:
        record = {"id": "s1", "summary": text}
        return set(forms_of(record)) | {_naive_mnemo(record)}

    tenant = Tenant(tmp_path / "t", testimony="salted")
    tenant.save({"id": "x", "summary": "x"})
    (tenant.memory_dir / "s1.json").write_text(
        json.dumps({"id": "s1", "summary": "my card ends in 4242"})
    )
    receipt = tenant.forget("s1", "user asked")
    assert (receipt.removed, receipt.entry.seq, tenant.verify().forgotten) == (True, 2, ("s1",))
    tomb = tenant.tombstone("s1")
    assert tomb is not None
    digests = {line["content_sha256"] for line in _lines(tenant)} | {tomb.retires}
    assert [c for c in candidates if guesses(c) & digests] == []
    disk = b"".join(p.read_bytes() for p in sorted(tenant.root.rglob("*")) if p.is_file())
    assert b"ends in 4242" not in disk


def test_removing_testimony_json_of_a_salted_tenant_shows(tmp_path: Path) -> None:
    """The mode file is part of the evidence: without it the salt is a filing field, so the
    salted records read altered (never silently sealed)."""
    tenant = Tenant(tmp_path / "t", testimony="salted")
    tenant.save({"id": "x", "summary": "x"})
    (tenant.root / "testimony.json").unlink()
    assert Tenant(tenant.root).verify().altered == ("x",)


def test_testimony_json_must_be_well_formed_and_regular(tmp_path: Path) -> None:
    """A hand-edited or unknown mode record is refused (``LedgerFormatError``), a symlink in
    its place is never followed (``StoreFileError``): verify does not guess the mode."""
    tenant = Tenant(tmp_path / "t")
    tenant.save({"id": "x", "summary": "x"})
    path = tenant.root / "testimony.json"
    for text in (
        '{"schema":"merkle-memory/testimony/1","testimony":"md5"}',
        '{"testimony":"salted"}',
        "salted",
    ):
        path.write_text(text)
        with pytest.raises(LedgerFormatError):
            tenant.verify()
    path.unlink()
    os.symlink(tmp_path / "elsewhere.json", path)
    with pytest.raises(StoreFileError):
        tenant.verify()


def test_a_bad_mode_is_refused() -> None:
    """The constructor and every records function check the mode name."""
    with pytest.raises(RecordError, match="testimony mode must be one of"):
        Tenant("t", testimony="sha1")
    with pytest.raises(RecordError):
        record_testimony({"id": "x"}, mode="MNEMO")


def test_the_implied_mode_reads_only_the_first_line(tmp_path: Path) -> None:
    """No ledger, an empty one or garbage: rfc8785 (not final until a first line exists);
    a first line this library wrote: rfc8785; the anchor's: mnemo; a first line holding an
    integer beyond 2**53 (never RFC 8785): mnemo."""
    path = tmp_path / "ledger.jsonl"
    assert implied_testimony_mode(path) == ("rfc8785", False)
    path.write_text("\n\n")
    assert implied_testimony_mode(path) == ("rfc8785", False)
    path.write_text("not json\n")
    assert ledger_testimony_mode(path) == "rfc8785"
    Tenant(tmp_path / "t").save({"id": "x"})
    assert implied_testimony_mode(tmp_path / "t" / "ledger.jsonl") == ("rfc8785", True)
    anchor = _anchor_tenant(tmp_path / "a")
    assert implied_testimony_mode(anchor / "ledger.jsonl") == ("mnemo", True)
    path.write_text('{"seq":1,"x":' + str(2**64) + "}\n")
    assert ledger_testimony_mode(path) == "mnemo"
