"""Tests of merkle_memory.bank.memory: the Memory value, its id, file name and file form."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import asset_path

from merkle_memory import canonical
from merkle_memory.bank.memory import SCHEMA, Memory, format_timestamp, memory_uri, parse_timestamp
from merkle_memory.errors import BankError, MemoryFormatError
from merkle_memory.strategies import memory_fields

T0 = datetime(2026, 5, 29, 12, 0, tzinfo=UTC)


def _vectors() -> list[dict[str, Any]]:
    path = asset_path("bank", "memory_ids.json")
    data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["memories"]
    return data


def _from_input(fields: dict[str, Any]) -> Memory:
    args = dict(fields)
    args["timestamp"] = parse_timestamp(args["timestamp"])
    return Memory(**args)


def test_shared_vectors_ids_file_names_and_canonical_bytes() -> None:
    """Every memory of memory_ids.json gets its id, file name and hashed bytes."""
    vectors = _vectors()
    assert len(vectors) == 7
    for vector in vectors:
        memory = _from_input(vector["input"])
        assert canonical.dumps(memory.hashed_dict()).decode() == vector["canonical"], vector["name"]
        assert memory.id == vector["id"], vector["name"]
        assert memory.file_name == vector["file_name"], vector["name"]


def test_ids_pinned_from_hand_written_canonical_strings() -> None:
    """The id is sha256 over the RFC 8785 text, worked out here by hand, not by canonical."""
    text = (
        '{"content":"  a|b\\n","links":["mm://memory/' + "0" * 64 + '#supports"],'
        '"schema":"memory/1","scope":"project","source_session":null,'
        '"tags":["a","a,b"],"timestamp":"2026-05-29T12:00:00.000001Z","type":"fact"}'
    )
    memory = Memory(
        "fact",
        "project",
        "  a|b\n",
        ["a,b", "a", "a"],
        T0 + timedelta(microseconds=1),
        None,
        ["mm://memory/" + "0" * 64 + "#supports"],
    )
    assert memory.id == hashlib.sha256(text.encode()).hexdigest()
    text2 = (
        '{"content":"caf\u00e9","links":[],"schema":"memory/1","scope":"user",'
        '"source_session":"","tags":[],"timestamp":"0999-01-02T03:04:05.000000Z","type":"x_y-1"}'
    )
    memory2 = Memory("x_y-1", "user", "café", (), datetime(999, 1, 2, 3, 4, 5, tzinfo=UTC), "")
    assert memory2.id == hashlib.sha256(text2.encode("utf-8")).hexdigest()
    assert memory2.file_name == f"09990102_030405_x_y-1_{memory2.id}.json"


def _tur_payload(m: Memory) -> str:
    """The anchor's ``|``-joined preimage (research/tur.md section 1), to show its collisions."""
    links = [{"uri": link, "relation": None} for link in m.links]
    parts = [
        m.timestamp.isoformat(),
        m.type,
        m.scope,
        ",".join(m.tags),
        m.content,
        str(links),
        m.source_session or "",
    ]
    return "|".join(parts)


def test_ambiguous_joins_do_not_collide() -> None:
    """Tags ["a","b"] vs ["a,b"], and a `|` moved between fields, give different ids."""
    two = Memory("fact", "p", "C", ["a", "b"], T0)
    one = Memory("fact", "p", "C", ["a,b"], T0)
    assert _tur_payload(two) == _tur_payload(one)  # the anchor's collision
    assert two.id != one.id
    # A `|` in content, tags or scope moves a boundary of the anchor's join:
    pipes = [
        Memory("fact", "p|a", "C", ["b"], T0),
        Memory("fact", "p", "C", ["a|b"], T0),
        Memory("fact", "p", "b|C", ["a"], T0),
    ]
    assert len({_tur_payload(m) for m in pipes}) == 1
    assert len({m.id for m in pipes}) == 3


def test_content_is_byte_exact_whitespace_and_dashes() -> None:
    """Leading/trailing whitespace and `---` are kept and hashed exactly."""
    plain = Memory("fact", "p", "x", timestamp=T0)
    for content in (" x", "x ", "x\n", "\tx", "---\nx", "x\n---\n", "\r\nx"):
        memory = Memory("fact", "p", content, timestamp=T0)
        assert memory.content == content
        assert memory.id != plain.id
        assert Memory.from_dict(canonical.loads(memory.to_bytes())).content == content


def test_none_and_empty_source_session_differ() -> None:
    """source_session None and "" are two values with two ids (null vs "")."""
    none = Memory("fact", "p", "x", timestamp=T0, source_session=None)
    empty = Memory("fact", "p", "x", timestamp=T0, source_session="")
    assert none.id != empty.id
    assert none.hashed_dict()["source_session"] is None
    assert empty.hashed_dict()["source_session"] == ""


def test_naive_timestamp_is_an_error_and_aware_ones_are_normalized_to_utc() -> None:
    """A naive datetime raises; the same instant in two zones gives one id, stored in UTC."""
    with pytest.raises(MemoryFormatError, match="naive"):
        Memory("fact", "p", "x", timestamp=datetime(2026, 5, 29, 12, 0))
    with pytest.raises(MemoryFormatError, match="naive"):
        parse_timestamp("2026-05-29T12:00:00")
    plus2 = datetime(2026, 5, 29, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    a = Memory("fact", "p", "x", timestamp=plus2)
    b = Memory("fact", "p", "x", timestamp=T0)
    assert a.id == b.id
    assert a.timestamp.tzinfo is UTC
    assert a.hashed_dict()["timestamp"] == "2026-05-29T12:00:00.000000Z"
    assert format_timestamp(plus2) == "2026-05-29T12:00:00.000000Z"
    assert parse_timestamp("2026-05-29T14:00:00.5+02:00") == T0 + timedelta(microseconds=500000)
    with pytest.raises(MemoryFormatError):
        Memory("fact", "p", "x", timestamp="2026-05-29T12:00:00Z")  # type: ignore[arg-type]
    with pytest.raises(MemoryFormatError, match="out of range"):
        Memory(
            "fact", "p", "x", timestamp=datetime.min.replace(tzinfo=timezone(timedelta(hours=1)))
        )


def test_schema_field_versions_the_preimage() -> None:
    """The hashed object carries schema memory/1; without it the digest differs; another
    schema in a file is refused."""
    memory = Memory("fact", "p", "x", timestamp=T0)
    hashed = memory.hashed_dict()
    assert hashed["schema"] == SCHEMA == "memory/1"
    assert canonical.digest({k: v for k, v in hashed.items() if k != "schema"}) != memory.id
    data = memory.to_dict()
    data["schema"] = "memory/2"
    with pytest.raises(MemoryFormatError, match="unsupported schema"):
        Memory.from_dict(data)


def test_changed_memory_is_a_new_value_with_a_new_id() -> None:
    """A memory is frozen; a changed copy has a new id (the anchor kept the stale id)."""
    memory = Memory("fact", "p", "x", timestamp=T0)
    with pytest.raises(AttributeError):
        memory.content = "y"  # type: ignore[misc]
    from dataclasses import replace

    changed = replace(memory, content="y")
    assert changed.id != memory.id
    assert changed.id == Memory("fact", "p", "y", timestamp=T0).id


@pytest.mark.parametrize(
    "kind", ["Fact", "../x", "a/b", "a\\b", "", "x" * 65, "fact\n", "f.ct", "é", " fact"]
)
def test_type_must_be_a_short_slug(kind: str) -> None:
    """Non-slug types (path separators, dots, upper case, newline, empty, too long) raise."""
    with pytest.raises(MemoryFormatError, match="slug"):
        Memory(kind, "p", "x", timestamp=T0)


@pytest.mark.parametrize("link", ["", "not a uri", "http://x y", "noscheme", "http://a\nb", "1x:y"])
def test_links_must_look_like_uris(link: str) -> None:
    """A link needs a scheme and no whitespace or control characters."""
    with pytest.raises(MemoryFormatError, match="URI"):
        Memory("fact", "p", "x", timestamp=T0, links=[link])


def test_bad_field_types_raise_memory_format_error() -> None:
    """Wrong types, a bare string as tags, lone surrogates: MemoryFormatError (a ValueError)."""
    bad: list[dict[str, Any]] = [
        {"tags": "abc"},
        {"tags": [1]},
        {"links": "mm://memory/x"},
        {"scope": None},
        {"content": b"x"},
        {"source_session": 3},
        {"content": "\ud800"},
        {"scope": "\udfff"},
    ]
    for change in bad:
        args: dict[str, Any] = {"type": "fact", "scope": "p", "content": "x", "timestamp": T0}
        args.update(change)
        with pytest.raises(MemoryFormatError):
            Memory(**args)
    assert issubclass(MemoryFormatError, ValueError) and issubclass(MemoryFormatError, BankError)


def test_memory_uri_and_tags_links_normalized() -> None:
    """Tags and links are stored sorted and unique; uri() is mm://memory/<id>."""
    memory = Memory("fact", "p", "x", ["b", "a", "b"], T0, None, ["z:1", "a:2", "z:1"])
    assert memory.tags == ("a", "b")
    assert memory.links == ("a:2", "z:1")
    assert memory.uri == "mm://memory/" + memory.id == memory_uri(memory.id)
    with pytest.raises(MemoryFormatError):
        memory_uri("../etc")


def test_from_dict_is_strict() -> None:
    """from_dict refuses unknown or missing keys, a wrong id, non-canonical field forms."""
    memory = Memory("fact", "p", "x", ["a", "b"], T0)
    good = memory.to_dict()
    assert Memory.from_dict(good) == memory
    cases: list[tuple[dict[str, Any], str]] = [
        ({**good, "status": "active"}, "unknown keys"),
        ({k: v for k, v in good.items() if k != "links"}, "missing keys: links"),
        ({**good, "id": "0" * 64}, "does not match"),
        ({**good, "tags": ["b", "a"]}, "sorted"),
        ({**good, "tags": ["a", "a", "b"]}, "sorted"),
        ({**good, "timestamp": "2026-05-29T12:00:00Z"}, "form"),
        ({**good, "timestamp": "2026-05-29T12:00:00.000000+00:00"}, "form"),
        ({**good, "timestamp": "2026-13-29T12:00:00.000000Z"}, "invalid timestamp"),
        ({**good, "tags": "a"}, "list"),
    ]
    for data, message in cases:
        with pytest.raises(MemoryFormatError, match=message):
            Memory.from_dict(data)
    with pytest.raises(MemoryFormatError, match="object"):
        Memory.from_dict(["x"])  # type: ignore[arg-type]
    without_id = {k: v for k, v in good.items() if k != "id"}
    assert Memory.from_dict(without_id, check_id=False) == memory


def _mutations(fields: dict[str, Any]) -> list[dict[str, Any]]:
    """One changed copy of ``fields`` per core field."""
    source = fields["source_session"]
    new_source = "" if source is None else (None if source == "" else source + "x")
    kind = fields["type"]
    return [
        {**fields, "type": kind[:-1] + ("b" if kind[-1] == "a" else "a")},
        {**fields, "scope": fields["scope"] + "x"},
        {**fields, "content": fields["content"] + " "},
        {**fields, "tags": [*fields["tags"], "\x00new-tag"]},
        {**fields, "timestamp": fields["timestamp"] + timedelta(microseconds=1)},
        {**fields, "source_session": new_source},
        {**fields, "links": [*fields["links"], "urn:new:link"]},
    ]


@given(memory_fields())
@settings(max_examples=150, deadline=None)
def test_any_change_to_any_core_field_changes_the_id(fields: dict[str, Any]) -> None:
    """Changing any one of the seven core fields changes the id; reordering does not."""
    memory = Memory(**fields)
    ids = {Memory(**changed).id for changed in _mutations(fields)}
    assert memory.id not in ids
    assert len(ids) == 7
    shuffled = {**fields, "tags": fields["tags"][::-1], "links": fields["links"][::-1]}
    assert Memory(**shuffled).id == memory.id


@given(memory_fields())
@settings(max_examples=100, deadline=None)
def test_file_form_round_trips_exactly(fields: dict[str, Any]) -> None:
    """to_bytes -> loads -> from_dict gives back an equal memory and the same bytes."""
    memory = Memory(**fields)
    again = Memory.from_dict(canonical.loads(memory.to_bytes()))
    assert again == memory
    assert again.to_bytes() == memory.to_bytes()
    assert again.hashed_dict() == memory.hashed_dict()
    assert again.id == hashlib.sha256(canonical.dumps(memory.hashed_dict())).hexdigest()


@given(st.datetimes(timezones=st.timezones()))
@settings(max_examples=100, deadline=None)
def test_timestamp_format_matches_a_naive_reference(value: datetime) -> None:
    """format_timestamp equals strftime of the UTC instant, when it is in range."""
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):
        with pytest.raises(MemoryFormatError):
            format_timestamp(value)
        return
    if utc.utcoffset() is None or not 1 <= utc.year <= 9999:
        return
    expected = f"{utc.year:04d}" + utc.strftime("-%m-%dT%H:%M:%S.%fZ")
    assert format_timestamp(value) == expected
