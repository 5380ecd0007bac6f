"""Records: strict reading, testimony in both forms, id validation (DESIGN section 4)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import asset_path

from merkle_memory.errors import RecordError
from merkle_memory.ledger import records


def test_testimony_matches_vectors_and_ignores_filing_fields() -> None:
    """Scenario 4: filing fields do not change the testimony; a sealed field does."""
    vec = json.loads(asset_path("mnemo", "ledger_vectors.json").read_text())
    for item in vec["records"]:
        assert records.testimony(item["record"]) == item["content_sha256"]
    rec = {"id": "a", "summary": "s", "key_facts": ["k"], "category": "decision"}
    before = records.testimony(rec)
    rec.update(category="topology", superseded_by="zzz", additional_tags=["x"])
    assert records.testimony(rec) == before
    rec["summary"] = "s2"
    assert records.testimony(rec) != before


def test_testimony_forms_big_integer_uses_anchor_form_only() -> None:
    """A value outside RFC 8785 is testified in the anchor form only and cannot be sealed."""
    rec = {"id": "a", "summary": 2**60}
    forms = records.testimony_forms(rec)
    assert len(forms) == 1 and len(forms[0]) == 64
    with pytest.raises(RecordError, match="canonicalized"):
        records.testimony(rec)
    assert records.testimony_forms({"id": "a", "summary": 1e16}) == (
        records.testimony({"id": "a", "summary": 1e16}),
        forms_anchor({"id": "a", "summary": 1e16}),
    )


def forms_anchor(rec: dict[str, object]) -> str:
    import hashlib

    body = {f: rec.get(f) for f in records.DEFAULT_SEALED_FIELDS}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize(
    "bad", ["", ".", "..", "a/../b", "a/b", "a\\b", "a\x00b", "tab\there", "x" * 201, 5, None]
)
def test_invalid_record_ids_are_refused(bad: object) -> None:
    """Ids that could name a file outside memory/ (or are not strings) raise RecordError."""
    with pytest.raises(RecordError):
        records.validate_record_id(bad)


def test_valid_record_ids_pass() -> None:
    """Ordinary ids, including non-ASCII and 200-byte ones, are accepted unchanged."""
    for ok in ("m1", "9f1c", "café-✓", "a.b", "x" * 200):
        assert records.validate_record_id(ok) == ok
        assert records.record_path("mem", ok) == Path("mem") / f"{ok}.json"


@pytest.mark.parametrize(
    "text",
    [
        '{"id": "a", "id": "b"}',
        '{"id": "a", "x": NaN}',
        '{"id": "a", "x": -Infinity}',
        "[1]",
        "{",
        '{"a": {"b": 1, "b": 2}}',
    ],
)
def test_read_record_is_strict(tmp_path: Path, text: str) -> None:
    """Duplicate keys (at any depth), NaN/Infinity, non-objects and bad JSON are RecordError."""
    path = tmp_path / "r.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RecordError):
        records.read_record(path)


def test_read_record_rejects_invalid_utf8(tmp_path: Path) -> None:
    """Invalid UTF-8 is a RecordError, never a UnicodeDecodeError."""
    path = tmp_path / "r.json"
    path.write_bytes(b'{"id": "\xff"}')
    with pytest.raises(RecordError):
        records.read_record(path)


def test_scan_records_keys_and_states(tmp_path: Path) -> None:
    """Keys are record ids (or the stem for unreadable files, which never match)."""
    mem = tmp_path / "memory"
    mem.mkdir()
    (mem / "x.json").write_text(json.dumps({"id": "real", "summary": "s"}), encoding="utf-8")
    (mem / "bad.json").write_text("{oops", encoding="utf-8")
    (mem / "evil.json").write_text(json.dumps({"id": "../up"}), encoding="utf-8")
    (mem / "notes.txt").write_text("ignored", encoding="utf-8")
    states = records.scan_records(mem)
    assert sorted(states) == ["bad", "evil", "real"]
    assert states["real"].forms == (records.testimony({"id": "real", "summary": "s"}),)
    assert states["real"].sealable == states["real"].forms[0]
    assert states["bad"].forms == () and states["bad"].sealable is None
    assert states["evil"].forms == () and states["evil"].sealable is None
    assert records.scan_records(tmp_path / "absent") == {}


def test_write_record_round_trips(tmp_path: Path) -> None:
    """write_record writes <id>.json that reads back equal; bad ids write nothing."""
    rec = {"id": "m1", "summary": "é", "n": 1.5}
    path = records.write_record(tmp_path / "memory", rec)
    assert path == tmp_path / "memory" / "m1.json"
    assert records.read_record(path) == rec
    with pytest.raises(RecordError):
        records.write_record(tmp_path / "memory", {"id": "../x"})
    with pytest.raises(RecordError):
        records.write_record(tmp_path / "memory", {"id": "y", "v": float("nan")})
    assert sorted(p.name for p in (tmp_path / "memory").iterdir()) == ["m1.json"]


def test_read_record_never_follows_a_symlink(tmp_path: Path) -> None:
    """read_record refuses a symlink (even to a good record) and a FIFO, with RecordError."""
    good = tmp_path / "good.json"
    good.write_text('{"id": "g"}', encoding="utf-8")
    link = tmp_path / "link.json"
    link.symlink_to(good)
    with pytest.raises(RecordError, match=r"link\.json: a symbolic link \(never followed\)$"):
        records.read_record(link)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(RecordError, match=r"fifo\.json: not a regular file \(never read\)$"):
        records.read_record(fifo)
    assert records.read_record(good) == {"id": "g"}


def test_scan_records_reports_symlinks_by_stem_with_a_problem(tmp_path: Path) -> None:
    """A symlinked record file (dangling or not) is keyed by its stem, never matches, cannot
    be sealed and says why; a symlinked folder is a RecordError."""
    mem = tmp_path / "memory"
    mem.mkdir()
    (tmp_path / "real.json").write_text('{"id": "other", "summary": "s"}', encoding="utf-8")
    (mem / "linked.json").symlink_to(tmp_path / "real.json")
    (mem / "dangling.json").symlink_to(tmp_path / "nowhere.json")
    (mem / "big.json").write_text('{"id": "big", "summary": 1152921504606846976}')
    states = records.scan_records(mem)
    assert sorted(states) == ["big", "dangling", "linked"]
    for key in ("dangling", "linked"):
        assert (states[key].forms, states[key].sealable) == ((), None)
        assert states[key].problem == records.SYMLINK_REASON
    assert states["big"].sealable is None
    assert states["big"].problem == "a sealed value outside RFC 8785"
    (tmp_path / "alias").symlink_to(mem)
    with pytest.raises(RecordError, match="alias is a symbolic link"):
        records.scan_records(tmp_path / "alias")


@pytest.mark.parametrize("bad", [["x"], "x", None, 3, {1: "one"}])
def test_testimony_and_write_refuse_non_records(tmp_path: Path, bad: object) -> None:
    """testimony, testimony_forms and write_record raise RecordError for a value that is not
    a mapping with str keys (never AttributeError or a silent key conversion)."""
    for call in (
        lambda: records.testimony(bad),  # type: ignore[arg-type]
        lambda: records.testimony_forms(bad),  # type: ignore[arg-type]
        lambda: records.write_record(tmp_path / "memory", bad),  # type: ignore[arg-type]
    ):
        with pytest.raises(RecordError):
            call()
    assert not (tmp_path / "memory").exists()


def test_check_sealed_fields() -> None:
    """A sequence of str passes as a tuple; one str, a non-iterable or a non-str item fail."""
    assert records.check_sealed_fields(["id", "summary"]) == ("id", "summary")
    for bad in ("summary", b"id", 5, ["id", None]):
        with pytest.raises(RecordError):
            records.check_sealed_fields(bad)
    with pytest.raises(RecordError):
        records.testimony({"id": "a"}, "id")


_json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
        | st.dictionaries(st.integers(0, 3) | st.none(), inner, max_size=2)
    ),
    max_leaves=12,
)


@settings(max_examples=100, deadline=None)
@given(record=st.dictionaries(st.text(max_size=8), _json_values, max_size=6))
def test_record_bytes_is_json_dumps_indented(record: dict[str, Any]) -> None:
    """``record_bytes`` (its fast indented encoder, ``json.dumps`` for anything unusual) gives
    exactly ``json.dumps(record, ensure_ascii=False, indent=2, allow_nan=False)`` and a
    newline, or ``RecordError`` exactly when ``json.dumps`` or the UTF-8 encoding refuses
    (NaN, infinity, a lone surrogate)."""
    try:
        expected: bytes | None = (
            json.dumps(record, ensure_ascii=False, indent=2, allow_nan=False) + "\n"
        ).encode("utf-8")
    except ValueError:
        expected = None
    if expected is None:
        with pytest.raises(RecordError, match="cannot be written as JSON"):
            records.record_bytes(record)
    else:
        assert records.record_bytes(record) == expected
