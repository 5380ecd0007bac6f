"""Strategies for memories of the bank (public through :mod:`merkle_memory.strategies`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Final, TypedDict

from hypothesis import strategies as st

from ._json import json_texts

if TYPE_CHECKING:
    from ..bank.memory import Memory

SearchStrategy = st.SearchStrategy


class MemoryFields(TypedDict):
    """Keyword arguments of ``Memory(**fields)`` (DESIGN section 5), as a caller passes them."""

    type: str
    scope: str
    content: str
    tags: list[str]
    timestamp: datetime
    source_session: str | None
    links: list[str]


_HEX: Final = "0123456789abcdef"


def _timestamps() -> SearchStrategy[datetime]:
    """Timezone-aware datetimes (fixed offsets), 1971..2100 so the UTC form stays in range."""
    offsets = st.integers(-14 * 60, 14 * 60).map(lambda m: timezone(timedelta(minutes=m)))
    return st.one_of(
        st.datetimes(datetime(1971, 1, 1), datetime(2100, 1, 1), timezones=st.just(UTC)),
        st.datetimes(datetime(1971, 1, 1), datetime(2100, 1, 1), timezones=offsets),
    )


def _links() -> SearchStrategy[str]:
    """URI strings: ``mm://memory/<id>`` links, web links and URNs (each with a scheme)."""
    hex_id = st.text(_HEX, min_size=64, max_size=64)
    return st.one_of(
        hex_id.map(lambda h: "mm://memory/" + h),
        hex_id.map(lambda h: "mm://memory/" + h + "#supersedes"),
        st.text("abcxyz019-_/", max_size=12).map(lambda p: "https://example.com/" + p),
        st.text("abc0129:", min_size=1, max_size=8).map(lambda p: "urn:x:" + p),
    )


def memory_fields(*, max_tags: int = 4, max_links: int = 3) -> SearchStrategy[MemoryFields]:
    """Keyword arguments for ``memory.Memory(**fields)``, as a caller would pass them.

    ``tags`` and ``links`` are lists in random order and may hold duplicates (the memory
    stores them sorted and unique, so its id does not depend on their order); ``timestamp``
    is timezone-aware with any UTC offset; ``content`` is any text (kept byte-exact, leading
    and trailing whitespace included); ``source_session`` is ``None``, ``""`` or text.

    Args:
        max_tags: most tags drawn (before removing duplicates).
        max_links: most links drawn.

    Returns:
        A strategy of :class:`MemoryFields`: ``type, scope, content, tags, timestamp,
        source_session, links`` (DESIGN section 5).

    Example:
        >>> from hypothesis import given
        >>> from merkle_memory.bank.memory import Memory
        >>> @given(memory_fields())
        ... def test_tag_order(f):
        ...     assert Memory(**f).id == Memory(**{**f, "tags": f["tags"][::-1]}).id
    """
    tag = st.one_of(
        st.sampled_from(["cli", "manual", "a,b", "x|y", "Z", ""]), json_texts(max_size=8)
    )
    return st.builds(
        MemoryFields,
        type=st.one_of(
            st.sampled_from(["fact", "preference", "decision", "insight"]),
            st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=16),
        ),
        scope=st.one_of(st.sampled_from(["project", "user", "global"]), json_texts(max_size=12)),
        content=st.one_of(json_texts(max_size=60), st.sampled_from([" padded ", "a|b", "\n"])),
        tags=st.lists(tag, max_size=max_tags).flatmap(
            lambda tags: st.permutations(tags + tags[:1]).map(list)
        ),
        timestamp=_timestamps(),
        source_session=st.one_of(st.none(), st.just(""), json_texts(max_size=12)),
        links=st.lists(_links(), max_size=max_links),
    )


def memories(*, max_tags: int = 4, max_links: int = 3) -> SearchStrategy[Memory]:
    """Valid ``memory.Memory`` values, built from :func:`memory_fields`.

    Args:
        max_tags: most tags.
        max_links: most links.

    Returns:
        A strategy of :class:`merkle_memory.bank.memory.Memory`.

    Raises:
        ImportError: ``merkle_memory.bank.memory`` is not available in this version.

    Example:
        >>> from hypothesis import given
        >>> @given(memories())
        ... def test_file_round_trip(m):
        ...     assert Memory.from_dict(canonical.loads(m.to_bytes())) == m
    """
    from ..bank.memory import Memory

    def build(fields: MemoryFields) -> Memory:
        return Memory(**fields)

    return memory_fields(max_tags=max_tags, max_links=max_links).map(build)
