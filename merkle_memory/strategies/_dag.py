"""Strategies for content blocks, buckets and conversations (public through
:mod:`merkle_memory.strategies`)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypedDict

from hypothesis import strategies as st

from ..canonical import JSONValue

if TYPE_CHECKING:
    from ..dag import Dag

SearchStrategy = st.SearchStrategy


class _BlockType(TypedDict):
    type: str


class BlockDict(_BlockType, total=False):
    """A content block in tapes' JSON form (DESIGN section 3; ``ContentBlock.from_dict``
    input): ``type`` always, the other fields when set."""

    text: str
    image_url: str
    image_base64: str
    media_type: str
    tool_use_id: str
    tool_name: str
    tool_input: dict[str, JSONValue]
    tool_result_id: str
    tool_output: str
    is_error: bool
    thinking: str
    thinking_signature: str
    content: JSONValue


class _BucketCore(TypedDict):
    type: str
    role: str
    content: list[BlockDict]


class BucketDict(_BucketCore, total=False):
    """A bucket as ``dag.Bucket.from_dict`` reads it: ``type``, ``role`` and ``content``
    always; the unhashed metadata ``model``, ``provider``, ``agent_name`` when recorded."""

    model: str
    provider: str
    agent_name: str


# --- content blocks and buckets (DESIGN section 3) -----------------------------------------

HARNESS_NOISE_TAGS: Final = ("system-reminder", "new-diagnostics", "environment_context")
"""Harness tags this module wraps noise in (all in ``projection.HARNESS_TAGS``)."""

_CLEAN_CHARS: SearchStrategy[str] = st.characters(
    exclude_categories=["Cs"], exclude_characters="<\r"
)
_WORDS: Final = st.sampled_from(
    ["ok", "ls -la", "Hey Claude!", "caf\u00e9", "\u2713 done", "line\nnext", "a  b", "x\ty", "42"]
)


def _clean_text(*, min_size: int = 0) -> SearchStrategy[str]:
    """Text without ``<`` (so no harness tag can start inside it) and without CR."""
    return st.one_of(
        st.text(_CLEAN_CHARS, min_size=min_size, max_size=30),
        st.lists(_WORDS, min_size=max(1, min_size), max_size=4).map(" ".join),
    )


def _ids() -> SearchStrategy[str]:
    return st.text("abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12)


def _tool_inputs() -> SearchStrategy[dict[str, JSONValue]]:
    """Tool arguments with no zero values (so noise can add some and projection prune them)."""
    nonzero: SearchStrategy[JSONValue] = st.one_of(
        st.text(_CLEAN_CHARS, min_size=1, max_size=12),
        st.integers(1, 10**6),
        st.just(True),
        st.floats(min_value=0.5, max_value=1e6),
        st.lists(st.text(max_size=4), min_size=1, max_size=3),
    )
    return st.dictionaries(
        st.text("abcdefghij_", min_size=1, max_size=8), nonzero, min_size=1, max_size=4
    )


def _text_block(text: str) -> BlockDict:
    return {"type": "text", "text": text}


def _thinking_block(text: str) -> BlockDict:
    return {"type": "thinking", "thinking": text}


def _tool_use_block(use_id: str, name: str, args: dict[str, JSONValue]) -> BlockDict:
    return {"type": "tool_use", "tool_use_id": use_id, "tool_name": name, "tool_input": args}


def _tool_result_block(result_id: str, output: str, is_error: bool) -> BlockDict:
    block: BlockDict = {"type": "tool_result", "tool_result_id": result_id, "tool_output": output}
    if is_error:
        block["is_error"] = True
    return block


def _image_url_block(path: str) -> BlockDict:
    return {"type": "image", "image_url": "https://example.com/" + path}


def _image_data_block(data: str) -> BlockDict:
    return {"type": "image", "media_type": "image/png", "image_base64": data}


def _server_block(use_id: str, content: list[dict[str, str]]) -> BlockDict:
    parsed: list[JSONValue] = [dict(item) for item in content]
    return {"type": "web_search_tool_result", "tool_use_id": use_id, "content": parsed}


@functools.cache
def block_dicts() -> SearchStrategy[BlockDict]:
    """Content blocks in tapes' JSON form (``ContentBlock.from_dict`` input), noise-free.

    Kinds: ``text``, ``thinking``, ``tool_use`` (``tool_input`` without zero values),
    ``tool_result`` (optionally ``is_error``), ``image`` (URL or base64 with ``media_type``)
    and a server-tool result carrying a parsed JSON ``content``. Text never contains ``<``,
    so adding harness noise around it (:func:`with_harness_noise`) cannot change its
    projection.

    Returns:
        A strategy of :class:`BlockDict` (keys among DESIGN section 3's block fields).

    Example:
        >>> from hypothesis import given
        >>> from merkle_memory.dag import ContentBlock
        >>> @given(block_dicts())
        ... def test_block(d):
        ...     ContentBlock.from_dict(d)
    """
    text = st.builds(_text_block, _clean_text(min_size=1))
    thinking = st.builds(_thinking_block, _clean_text(min_size=1))
    tool_use = st.builds(
        _tool_use_block,
        _ids(),
        st.sampled_from(["Bash", "Edit", "Read", "web_search"]),
        _tool_inputs(),
    )
    tool_result = st.builds(_tool_result_block, _ids(), _clean_text(min_size=1), st.booleans())
    image = st.one_of(
        st.builds(_image_url_block, _ids()),
        st.builds(_image_data_block, st.sampled_from(["iVBORw0KGgo=", "R0lGODlhAQABAAAAACw="])),
    )
    server = st.builds(
        _server_block,
        _ids(),
        st.lists(
            st.dictionaries(st.sampled_from(["url", "title"]), st.text(max_size=8), min_size=1),
            min_size=1,
            max_size=2,
        ),
    )
    return st.one_of(text, text, thinking, tool_use, tool_result, image, server)


def bucket_dicts(
    *, roles: Sequence[str] = ("user", "assistant"), max_blocks: int = 4
) -> SearchStrategy[BucketDict]:
    """Buckets in the form ``dag.Bucket.from_dict`` reads: ``{"type", "role", "content"}``.

    ``type`` is ``"message"`` (as importers set it); ``content`` holds 1..``max_blocks``
    :func:`block_dicts`. No metadata and no noise: see :func:`with_harness_noise`.

    Args:
        roles: the roles to draw from.
        max_blocks: most content blocks (at least 1).

    Returns:
        A strategy of :class:`BucketDict`.

    Example:
        >>> from hypothesis import given
        >>> from merkle_memory import dag
        >>> @given(bucket_dicts())
        ... def test_hash_shape(b):
        ...     assert len(dag.node_hash(dag.Bucket.from_dict(b), None)) == 64
    """
    return _bucket_dicts(tuple(roles), max(1, max_blocks))


def _bucket(role: str, blocks: list[BlockDict]) -> BucketDict:
    return {"type": "message", "role": role, "content": blocks}


@functools.cache
def _bucket_dicts(roles: tuple[str, ...], max_blocks: int) -> SearchStrategy[BucketDict]:
    return st.builds(
        _bucket,
        st.sampled_from(roles),
        st.lists(block_dicts(), min_size=1, max_size=max_blocks),
    )


_NOISE_BODIES: Final = st.one_of(
    st.text(_CLEAN_CHARS, max_size=20),
    st.sampled_from(
        [
            "\n# currentDate\nToday's date is 2026-05-20.\n",
            "<cwd>/tmp</cwd><shell>zsh</shell>",
            "<status>running</status> nested",
            "MCP inventory",
        ]
    ),
)


_NOISE_SPEC: Final = st.tuples(
    st.sampled_from(HARNESS_NOISE_TAGS),
    _NOISE_BODIES,
    st.sampled_from(["inside", "before", "after", "unclosed"]),
    st.sampled_from(["", "\n", "\n\n", " \n"]),
    st.integers(0, 1 << 16),
)


def _noisy_text(text: str, spec: tuple[str, str, str, str, int]) -> str:
    """``text`` with harness-tag noise inserted where the projection removes all of it."""
    tag, body, where, sep, at = spec
    noise = f"<{tag}>{body}</{tag}>"
    if where == "inside":
        at %= len(text) + 1
        return text[:at] + noise + text[at:]
    if where == "before":
        return noise + sep + text
    if where == "after":
        return text + sep.strip(" ") + noise
    return text + "\n" + f"<{tag}>" + body  # an unclosed tag drops the rest of the text


_ZERO_ARGS: SearchStrategy[dict[str, JSONValue]] = st.dictionaries(
    st.text("KLMNOP", min_size=1, max_size=3),
    st.sampled_from([False, "", 0, None, [], {}, {"off": False}, 0.0]),
    max_size=3,
)
_SIGNATURES: Final = st.sampled_from(["EosCCmMIDRgC", "sig=="])
_NOISE_BLOCK: Final = st.tuples(
    st.integers(0, 1 << 16), st.sampled_from(HARNESS_NOISE_TAGS), _NOISE_BODIES
)
_METADATA: Final = st.fixed_dictionaries(
    {},
    optional={
        "model": st.sampled_from(["claude-opus-4", "gpt-5", "claude-haiku"]),
        "provider": st.sampled_from(["anthropic", "openai"]),
        "agent_name": st.sampled_from(["claude-code", "codex"]),
    },
)


@st.composite
def _noisy_block(draw: st.DrawFn, block: BlockDict) -> BlockDict:
    out = block.copy()
    if (text := out.get("text")) and draw(st.booleans()):
        out["text"] = _noisy_text(text, draw(_NOISE_SPEC))
    if (output := out.get("tool_output")) and draw(st.booleans()):
        out["tool_output"] = _noisy_text(output, draw(_NOISE_SPEC))
    if out["type"] == "thinking" and draw(st.booleans()):
        out["thinking_signature"] = draw(_SIGNATURES)
    if isinstance(args := out.get("tool_input"), dict) and draw(st.booleans()):
        extra = draw(_ZERO_ARGS)
        out["tool_input"] = {**extra, **args}
    return out


@st.composite
def _with_noise(draw: st.DrawFn, bucket: BucketDict) -> BucketDict:
    blocks = [draw(_noisy_block(b)) for b in bucket["content"]]
    for _ in range(draw(st.integers(0, 2))):  # whole blocks of pure harness noise
        at, tag, body = draw(_NOISE_BLOCK)
        blocks.insert(at % (len(blocks) + 1), _text_block(f"<{tag}>{body}</{tag}>"))
    out = bucket.copy()
    out["content"] = blocks
    metadata = draw(_METADATA)
    if "model" in metadata:
        out["model"] = metadata["model"]
    if "provider" in metadata:
        out["provider"] = metadata["provider"]
    if "agent_name" in metadata:
        out["agent_name"] = metadata["agent_name"]
    return out


def with_harness_noise(bucket: BucketDict) -> SearchStrategy[BucketDict]:
    """The bucket as a harness would record it, with noise the node hash must ignore.

    Adds, at random: ``<system-reminder>``/``<new-diagnostics>``/``<environment_context>``
    wrapped text inside, before or after a text or ``tool_output`` (or an unclosed one at its
    end), whole text blocks holding only such noise, a ``thinking_signature``, zero-valued
    ``tool_input`` arguments (``false``, ``""``, ``0``, ``null``, ``[]``, empty objects), and
    ``model``/``provider``/``agent_name`` metadata. The input is not modified. Valid for
    buckets from :func:`bucket_dicts` (their text contains no ``<``).

    Args:
        bucket: a bucket dict from :func:`bucket_dicts`.

    Returns:
        A strategy of :class:`BucketDict` with ``node_hash`` equal to that of ``bucket``
        (DESIGN section 3 projection rules).

    Example:
        >>> from hypothesis import given
        >>> @given(bucket_dicts().flatmap(lambda b: st.tuples(st.just(b), with_harness_noise(b))))
        ... def test_noise(pair):
        ...     clean, noisy = (dag.Bucket.from_dict(b) for b in pair)
        ...     assert dag.node_hash(clean, None) == dag.node_hash(noisy, None)
    """
    return _with_noise(bucket)


# --- conversations (DESIGN section 3) ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of a generated conversation.

    Attributes:
        parent: 0-based index of the parent turn in ``Conversation.turns``, ``None`` for the
            root (always smaller than this turn's own index).
        bucket: the clean bucket dict (:func:`bucket_dicts`).
        recorded: the same bucket as the harness recorded it (with noise when the strategy
            was asked for noise, else equal to ``bucket``).
    """

    parent: int | None
    bucket: BucketDict
    recorded: BucketDict


@dataclass(frozen=True, slots=True)
class Conversation:
    """A generated conversation tree: turn 0 is the root; later turns name earlier parents.

    Attributes:
        turns: the turns in insertion order.
    """

    turns: tuple[Turn, ...]

    def children(self, index: int) -> list[int]:
        """0-based indices of the turns whose parent is turn ``index``, in insertion order."""
        return [i for i, t in enumerate(self.turns) if t.parent == index]


_PERCENT: Final = st.integers(0, 99)
_ANY_INDEX: Final = st.integers(0, 1 << 16)


@st.composite
def _conversations(
    draw: st.DrawFn, min_turns: int, max_turns: int, noise: bool, branch: float
) -> Conversation:
    n = draw(st.integers(min_turns, max_turns))
    turns: list[Turn] = []
    for i in range(n):
        parent: int | None = None
        if i > 0:
            forks = draw(_PERCENT) < branch * 100
            parent = draw(_ANY_INDEX) % i if forks else i - 1
        role = "user" if parent is None or turns[parent].bucket["role"] != "user" else "assistant"
        bucket = draw(bucket_dicts(roles=(role,), max_blocks=3))
        recorded = draw(with_harness_noise(bucket)) if noise else bucket
        turns.append(Turn(parent, bucket, recorded))
    return Conversation(tuple(turns))


def conversations(
    *, min_turns: int = 1, max_turns: int = 8, noise: bool = True, branch: float = 0.3
) -> SearchStrategy[Conversation]:
    """Conversation trees with branches and (optionally) harness noise.

    Roles alternate user/assistant along each path. With probability ``branch`` a turn forks
    from a random earlier turn instead of the previous one (an edited prompt, a retried
    answer), so the tree has several leaves and branch points. Two turns may happen to have
    equal content under one parent: they are then one node of the DAG.

    Args:
        min_turns: fewest turns (at least 1).
        max_turns: most turns.
        noise: give each turn a ``recorded`` form with :func:`with_harness_noise`.
        branch: probability, 0..1, that a turn does not continue the previous one.

    Returns:
        A strategy of :class:`Conversation`.

    Example:
        >>> from hypothesis import given
        >>> @given(conversations())
        ... def test_noise_free_ids(conv):
        ...     assert conversation_hashes(conv) == conversation_hashes(conv, recorded=True)
    """
    return _conversations(max(1, min_turns), max(1, min_turns, max_turns), noise, branch)


def conversation_hashes(conv: Conversation, *, recorded: bool = False) -> list[str]:
    """Node hash of every turn, in turn order, through ``dag.node_hash``.

    Args:
        conv: a drawn :class:`Conversation`.
        recorded: hash the ``recorded`` (noisy) buckets instead of the clean ones.

    Returns:
        One 64-char lowercase hex hash per turn (equal hashes for turns that are one node).

    Raises:
        ImportError: ``merkle_memory.dag`` is not available in this version.
    """
    from .. import dag

    hashes: list[str] = []
    for turn in conv.turns:
        parent = None if turn.parent is None else hashes[turn.parent]
        data = turn.recorded if recorded else turn.bucket
        hashes.append(dag.node_hash(dag.Bucket.from_dict(data), parent))
    return hashes


def conversation_dag(conv: Conversation, *, recorded: bool = True) -> Dag:
    """Build a ``dag.Dag`` from a drawn conversation, adding turns in order.

    Turns whose node already exists (equal content under one parent) are no-ops, as in tapes.

    Args:
        conv: a drawn :class:`Conversation`.
        recorded: build from the ``recorded`` (noisy) buckets, as an importer would see them.

    Returns:
        A :class:`merkle_memory.dag.Dag` rooted at turn 0.

    Raises:
        ImportError: ``merkle_memory.dag`` is not available in this version.

    Example:
        >>> from hypothesis import given
        >>> @given(conversations())
        ... def test_size(conv):
        ...     assert len(conversation_dag(conv)) == len(set(conversation_hashes(conv)))
    """
    from .. import dag

    graph = dag.Dag()
    hashes: list[str] = []
    for turn in conv.turns:
        parent = None if turn.parent is None else hashes[turn.parent]
        bucket = dag.Bucket.from_dict(turn.recorded if recorded else turn.bucket)
        node = dag.Node.create(bucket, parent)
        graph.add(node)
        hashes.append(node.hash)
    return graph
