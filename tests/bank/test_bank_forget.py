"""Forgetting memories of a bank and salted bank ids (issue 20, items 2 and 3)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from pathlib import Path

import pytest
from support import T0, Crash, Recorder, ledger_lines, mem

from merkle_memory import canonical
from merkle_memory.bank import BankProblem, Memory, MemoryBank
from merkle_memory.bank.memory import memory_uri
from merkle_memory.errors import (
    BankError,
    LedgerBrokenError,
    MemoryFormatError,
    MemoryNotFoundError,
    TamperedMemoryError,
)


def _bank(tmp_path: Path, **kw: bool) -> tuple[MemoryBank, str, str]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    bank = MemoryBank(tmp_path / "bank", **kw)
    a = bank.save(mem("my card ends in 4242"))
    b = bank.save(mem("Tests use pytest", 1))
    return bank, a, b


def _files(bank: MemoryBank) -> list[str]:
    return sorted(p.relative_to(bank.root).as_posix() for p in bank.root.rglob("*.json"))


# --- Memory: salted ids ----------------------------------------------------------------------


def test_a_salted_memory_hashes_its_salt_before_the_canonical_bytes() -> None:
    """A salted memory's id is SHA-256(salt bytes || RFC 8785 bytes of the unsalted hashed
    object); its file holds the salt; from_dict reads it back; the unsalted id is unchanged."""
    plain = mem("x")
    salt = "0f" * 32
    salted = plain.salted(salt)
    data = canonical.dumps(plain.hashed_dict())
    assert plain.id == hashlib.sha256(data).hexdigest()
    assert salted.id == hashlib.sha256(bytes.fromhex(salt) + data).hexdigest()
    assert salted.to_dict() == {**plain.to_dict(), "id": salted.id, "salt": salt}
    assert Memory.from_dict(json.loads(salted.to_bytes())) == salted
    assert salted.same_content(plain) and salted != plain
    assert plain.salted().salt != plain.salted().salt  # fresh salts


@pytest.mark.parametrize("salt", ["00", "G" * 64, 5, "AB" * 32])
def test_a_salt_must_be_64_lowercase_hex(salt: object) -> None:
    """A salt that is not 64 lowercase hex is refused (``MemoryFormatError``)."""
    with pytest.raises(MemoryFormatError, match="salt must be 64 lowercase hex"):
        mem("x").salted(salt)  # type: ignore[arg-type]


def test_a_null_salt_in_a_file_is_refused() -> None:
    """``"salt": null`` is not an unsalted memory with an extra key: it is refused."""
    data = {**mem("x").to_dict(), "salt": None}
    with pytest.raises(MemoryFormatError, match="not null"):
        Memory.from_dict(data, check_id=False)


# --- forgetting ------------------------------------------------------------------------------


def test_forget_removes_the_file_and_seals_a_tombstone(tmp_path: Path) -> None:
    """The memory file is gone, the ledger's last entry is a ``forget`` of the id whose
    digest is the tombstone's, the tombstone retires the id, and verify is ok with the id
    forgotten; reading the id says it was forgotten."""
    bank, a, b = _bank(tmp_path)
    receipt = bank.forget(a, "user asked")
    assert a not in bank
    last = ledger_lines(bank)[-1]
    assert (last["seq"], last["op"], last["memory_id"]) == (3, "forget", a)
    assert receipt.tombstone is not None and receipt.tombstone.retires == a
    assert last["content_sha256"] == receipt.tombstone.digest()
    report = bank.verify()
    assert (report.ok, report.active, report.forgotten) == (True, 1, (a,))
    assert report.ledger is not None and report.ledger["sealed"] == 1
    with pytest.raises(MemoryNotFoundError, match="was forgotten"):
        bank.get(a)
    assert _files(bank) == [
        f"forgotten/{a}.json",
        f"memories/{mem('Tests use pytest', 1).file_name}",
    ]
    assert bank.get(b).content == "Tests use pytest"


def test_an_archived_memory_can_be_forgotten(tmp_path: Path) -> None:
    """Forget finds the file in ``memories/archive/`` as well."""
    bank, a, _b = _bank(tmp_path)
    bank.archive(a)
    assert bank.forget(a, "r").removed is True
    assert bank.verify().archived == 0 and bank.verify().forgotten == (a,)


def test_a_consolidation_keeps_an_explained_link_to_a_forgotten_original(tmp_path: Path) -> None:
    """A consolidated memory links to its originals; after one is forgotten the link
    dangles, and verify explains it in ``forgotten_links`` while staying ok."""
    bank, a, b = _bank(tmp_path)
    summary = bank.consolidate([a, b], "two facts", timestamp=T0)
    bank.forget(a, "r")
    report = bank.verify()
    rel = bank.locate(summary).path
    assert report.ok
    assert report.forgotten_links == ((rel, memory_uri(a)),)
    assert report.to_dict()["forgotten_links"] == [{"path": rel, "link": memory_uri(a)}]


def test_a_restored_memory_reappears_until_forgotten_again(tmp_path: Path) -> None:
    """A forgotten memory's file put back reads ``reappeared`` (not ok); forgetting again
    removes it without a new entry."""
    bank, a, _b = _bank(tmp_path)
    path = bank.root / bank.locate(a).path
    data = path.read_bytes()
    bank.forget(a, "r")
    path.write_bytes(data)
    report = bank.verify()
    assert report.ok is False and report.ledger is not None
    assert report.ledger["reappeared"] == [a]
    again = bank.forget(a, "r")
    assert (again.already_forgotten, again.removed, len(ledger_lines(bank))) == (True, True, 3)
    assert bank.verify().ok


def test_an_id_given_as_a_str_subclass_is_read_as_its_value(tmp_path: Path) -> None:
    """A memory id passed as a subclass of ``str`` works as its value: the first forget
    (it raised ``LedgerFormatError`` from the tombstone's check) and the second (it found no
    memory) both go through, and ``get`` of the other memory reads it."""

    class Id(str):
        pass

    bank, a, b = _bank(tmp_path)
    first = bank.forget(Id(a), "r")
    assert (first.already_forgotten, first.removed, len(ledger_lines(bank))) == (False, True, 3)
    again = bank.forget(Id(a), "r")
    assert (again.already_forgotten, len(ledger_lines(bank))) == (True, 3)
    assert bank.get(Id(b)).id == b and type(bank.get(Id(b)).id) is str
    assert bank.verify().ok


def test_saving_a_forgotten_memory_again_seals_it_even_after_a_crash(tmp_path: Path) -> None:
    """Saving a forgotten memory again writes it and seals it (``save``); when a crash left
    the file written but unsealed (it then reads ``reappeared``), saving it again seals it."""
    bank, a, _b = _bank(tmp_path)
    memory = bank.get(a)
    bank.forget(a, "r")
    assert bank.save(memory) == a
    assert (bank.verify().ok, ledger_lines(bank)[-1]["op"]) == (True, "save")
    bank.forget(a, "again")
    (bank.active_dir / memory.file_name).write_bytes(memory.to_bytes())  # written, never sealed
    assert bank.verify().ledger["reappeared"] == [a]  # type: ignore[index]
    assert bank.save(memory) == a
    report = bank.verify()
    assert (report.ok, report.forgotten, ledger_lines(bank)[-1]["op"]) == (True, (), "save")


def test_forget_refuses_unknown_ids_and_bad_arguments(tmp_path: Path) -> None:
    """An id no file and no entry carries: ``MemoryNotFoundError``; a malformed id or reason:
    ``BankError``; nothing is written."""
    bank, a, _b = _bank(tmp_path)
    before = bank.ledger_path.read_bytes()
    with pytest.raises(MemoryNotFoundError):
        bank.forget("0" * 64, "r")
    with pytest.raises(BankError, match="not a memory id"):
        bank.forget("abc", "r")
    with pytest.raises(BankError, match="a reason is a string"):
        bank.forget(a, None)  # type: ignore[arg-type]
    with pytest.raises(BankError, match="a reason must not be empty"):
        bank.forget(a, "")
    assert bank.ledger_path.read_bytes() == before
    assert not (bank.root / "forgotten").exists()
    with pytest.raises(BankError, match="no memory bank"):
        MemoryBank(tmp_path / "none").forget(a, "r")


def test_forget_order_makes_the_line_durable_before_the_file_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bank forget order: tombstone written and fsynced (pending), then the line written and
    flushed and a head slot written and flushed, then the memory file unlinked and
    ``memories/`` fsynced, then the tombstone renamed and ``forgotten/`` fsynced."""
    bank, a, _b = _bank(tmp_path)
    name = bank.locate(a).path.rpartition("/")[2]
    ops = Recorder(monkeypatch)
    bank.forget(a, "r")
    monkeypatch.undo()
    pending = f"{a}.json.pending"
    assert ops.index("fsync", pending + "~tmp") < ops.index("pwrite", "ledger.jsonl")
    assert ops.index("pwrite", "ledger.jsonl") < ops.index("fdatasync", "ledger.jsonl")
    assert ops.index("fdatasync", "ledger.jsonl") < ops.index("pwrite", "ledger.head")
    assert ops.index("pwrite", "ledger.head") < ops.index("fdatasync", "ledger.head")
    assert ops.index("fdatasync", "ledger.head") < ops.index("unlink", name)
    assert ops.index("unlink", name) < ops.index("fsync", "memories", last=True)
    assert ops.index("fsync", "memories", last=True) < ops.index("replace", f"{pending}->{a}.json")
    assert ops.calls[-1] == ("fsync", "forgotten")


def test_a_crash_at_any_step_of_forget_leaves_the_memory_sealed_or_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """For every step k of a bank forget, stop it before its k-th file operation: verify is
    ok with the memory sealed (line not written) or forgotten (written), never missing;
    ``seal`` settles the files; forgetting again then finishes the job."""
    bank, a, _b = _bank(tmp_path / "count")
    ops = Recorder(monkeypatch)
    bank.forget(a, "r")
    monkeypatch.undo()
    steps = len(ops.calls)
    outcomes = set()
    for k in range(steps + 1):
        bank, a, _b = _bank(tmp_path / f"k{k}")
        ops = Recorder(monkeypatch, crash_at=k)
        with contextlib.suppress(Crash):
            bank.forget(a, "r")
        monkeypatch.undo()
        written = ("pwrite", "ledger.jsonl") in ops.calls
        report = bank.verify()
        assert report.ok and report.ledger is not None, k
        assert (report.ledger["missing"], report.ledger["altered"]) == ([], []), k
        verdict = "forgotten" if report.forgotten == (a,) else "sealed"
        assert verdict == ("forgotten" if written else "sealed"), k
        assert bank.seal().sealed_ids == (), k
        pending = list((bank.root / "forgotten").glob("*.pending"))
        assert pending == [], k
        assert (a in bank) == (verdict == "sealed"), k
        bank.forget(a, "r")
        assert bank.verify().forgotten == (a,), k
        outcomes.add(verdict)
    assert outcomes == {"sealed", "forgotten"}


# --- salted banks ----------------------------------------------------------------------------


def test_a_salted_bank_records_its_mode_and_salts_every_save(tmp_path: Path) -> None:
    """``MemoryBank(salted=True)`` records ``salted`` in testimony.json; each save writes a
    salted copy (the id returned is the salted id, sealed in the ledger); saving the same
    content again finds that copy; later banks opened without the flag stay salted."""
    bank, a, _b = _bank(tmp_path, salted=True)
    assert (bank.root / "testimony.json").read_bytes() == (
        b'{"schema":"merkle-memory/testimony/1","testimony":"salted"}\n'
    )
    stored = bank.get(a)
    assert stored.salt is not None and stored.same_content(mem("my card ends in 4242"))
    assert a != mem("my card ends in 4242").id
    assert ledger_lines(bank)[0]["memory_id"] == a
    assert MemoryBank(bank.root).save(mem("my card ends in 4242")) == a
    c = MemoryBank(bank.root).save(mem("new", 2))
    assert MemoryBank(bank.root).get(c).salt is not None
    assert MemoryBank(bank.root).salted and bank.verify().ok
    summary = bank.consolidate([a, c], "both", timestamp=T0)
    assert bank.get(summary).salt is not None


def test_a_salted_bank_stays_salted(tmp_path: Path) -> None:
    """``salted=False`` on a salted bank is refused at the next save, before writing."""
    bank, _a, _b = _bank(tmp_path, salted=True)
    with pytest.raises(BankError, match="stays salted"):
        MemoryBank(bank.root, salted=False).save(mem("x", 3))
    assert len(list(bank.active_dir.glob("*.json"))) == 2
    with pytest.raises(BankError, match="salted is True, False or None"):
        MemoryBank(bank.root, salted="yes")  # type: ignore[arg-type]


def test_after_forgetting_no_brute_force_links_a_salted_id_to_content(tmp_path: Path) -> None:
    """Acceptance (issue 20 item 2, bank): knowing type, scope and timestamp, a brute force
    over 'my card ends in NNNN' finds no id the bank still holds (ledger and tombstones) once
    the salted memory is forgotten; the unsalted control is found."""
    candidates = {mem(f"my card ends in {n:04d}").id: n for n in range(10_000)}
    found = {}
    for salted in (True, False):
        bank, a, _b = _bank(tmp_path / str(salted), salted=salted)
        bank.forget(a, "user asked")
        held = b"".join(p.read_bytes() for p in bank.root.rglob("*") if p.is_file())
        # the content itself: "4242" alone occurs by chance in hashes and nanosecond times
        assert b"card ends in" not in held
        ids = {line["memory_id"] for line in ledger_lines(bank)}
        ids |= {line["content_sha256"] for line in ledger_lines(bank)}
        found[salted] = sorted(candidates[i] for i in ids if i in candidates)
    assert found == {True: [], False: [4242]}


def test_forget_on_a_broken_bank_chain_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """A bank whose ledger line 2 was edited: ``forget`` raises ``LedgerBrokenError`` naming
    the break; no file of the bank changes."""
    bank, a, b = _bank(tmp_path)
    lines = bank.ledger_path.read_bytes().splitlines(keepends=True)
    edited = lines[1].replace(b'"op":"save"', b'"op":"forget"')
    assert edited != lines[1]
    bank.ledger_path.write_bytes(b"".join([lines[0], edited, *lines[2:]]))
    before = {p: p.read_bytes() for p in bank.root.rglob("*") if p.is_file()}
    for mid in (a, b):
        with pytest.raises(LedgerBrokenError) as info:
            bank.forget(mid, "r")
        assert str(info.value) == (
            "ledger chain broken at seq 2: entry hash does not match its contents; refusing "
            "to forget"
        )
    assert {p: p.read_bytes() for p in bank.root.rglob("*") if p.is_file()} == before


def test_a_reappeared_memory_is_refused_by_get_and_left_out_of_the_list(tmp_path: Path) -> None:
    """Trial (MED 8): a forgotten memory whose file is restored from a backup: ``get`` and
    ``locate`` raise ``TamperedMemoryError`` saying it was forgotten; ``memories`` leaves it
    out and reports a ``reappeared`` problem; the other memory is unaffected."""
    bank, a, b = _bank(tmp_path)
    path = bank.locate(a).path
    backup = (bank.root / path).read_bytes()
    bank.forget(a, "asked")
    (bank.root / path).write_bytes(backup)
    why = (
        f"memory {a} was forgotten (forgotten/{a}.json) and its file reappeared (restored "
        "from a backup?): forget it again to remove it"
    )
    with pytest.raises(TamperedMemoryError) as info:
        bank.get(a)
    assert (str(info.value), info.value.path) == (f"{path}: {why}", path)
    problems: list[BankProblem] = []
    assert [s.memory.id for s in bank.memories(archived=None, problems=problems)] == [b]
    assert problems == [BankProblem(path, "reappeared", why)]
    assert bank.get(b).id == b
    bank.forget(a, "again")
    problems.clear()
    assert [s.memory.id for s in bank.memories(problems=problems)] == [b] and problems == []
