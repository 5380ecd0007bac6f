"""Private: buckets, nodes and their hashes (re-exported by :mod:`merkle_memory.dag`).

A :class:`Node` is one message of a conversation (a :class:`Bucket` of :class:`ContentBlock`)
plus the hash of its parent. Its id is (DESIGN section 3, MUST; tapes ``pkg/merkle``)::

    digest({"parent": parent_hash or "",
            "content": {"type": bucket.type, "role": bucket.role,
                        "content": [b.to_dict() for b in project_content(bucket.content)]}})

so a node id commits to the whole conversation before it, and harness noise removed by
:func:`~merkle_memory.projection.project_content` does not change it. Model, provider, agent
name and all other metadata are not hashed.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .. import canonical
from .._json import HEX64, check_text, json_copy, plain_json
from ..blocks import ContentBlock
from ..canonical import MAX_SAFE_INTEGER
from ..errors import CanonicalizationError, DagError, NodeFormatError
from ..projection import project_content, project_text, prune_tool_input

__all__ = ["Bucket", "Node", "node_digest", "node_hash"]


@dataclass(frozen=True, slots=True)
class Bucket:
    """The hashed payload of a node: one message (tapes ``merkle.Bucket``).

    Attributes:
        type: payload kind; importers set ``"message"``.
        role: ``"user"``, ``"assistant"``, ... (hashed: the same text under another role is
            another node).
        content: the message's blocks, in order (a list given here is stored as a tuple).
        model: model name, e.g. ``"claude-opus-4-1"`` (not hashed), or ``None``.
        provider: provider name, e.g. ``"anthropic"`` (not hashed), or ``None``.
        agent_name: harness or agent name (not hashed), or ``None``.

    Raises:
        NodeFormatError: on construction, an empty or non-string ``type``/``role``, a
            content item that is not a :class:`ContentBlock`, or a non-string model, provider
            or agent name.
    """

    type: str
    role: str
    content: tuple[ContentBlock, ...] = ()
    model: str | None = None
    provider: str | None = None
    agent_name: str | None = None

    def __post_init__(self) -> None:
        kind, role = self.type, self.role
        # Exact ASCII strings (the common case) need no further check.
        if not (
            type(kind) is str
            and type(role) is str
            and kind
            and role
            and kind.isascii()
            and role.isascii()
        ):
            for name in ("type", "role"):
                value = getattr(self, name)
                if not isinstance(value, str) or not value:
                    raise NodeFormatError(f"bucket {name} must be a non-empty string")
                check_text(value, f"bucket {name}", NodeFormatError)
        model, provider, agent = self.model, self.provider, self.agent_name
        if (
            (model is not None and not isinstance(model, str))
            or (provider is not None and not isinstance(provider, str))
            or (agent is not None and not isinstance(agent, str))
        ):
            for name in ("model", "provider", "agent_name"):
                value = getattr(self, name)
                if value is not None and not isinstance(value, str):
                    raise NodeFormatError(f"bucket {name} must be a string or None")
        content = self.content
        if type(content) is not tuple:
            if not isinstance(content, Sequence) or isinstance(content, str):
                raise NodeFormatError("bucket content must be a sequence of content blocks")
            content = tuple(content)
        for block in content:
            if type(block) is not ContentBlock and not isinstance(block, ContentBlock):
                raise NodeFormatError(
                    f"bucket content holds a {type(block).__name__}, not a ContentBlock"
                )
        object.__setattr__(self, "content", content)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Bucket:
        """Build a bucket from ``{"type", "role", "content": [block objects], ...}``.

        ``model``, ``provider`` and ``agent_name`` are optional keys.

        Raises:
            NodeFormatError: not an object, a missing ``type`` or ``role``, an unknown
                key, or ``content`` not a list.
            ContentBlockError: a block :meth:`ContentBlock.from_dict` rejects.
        """
        if not isinstance(data, Mapping):
            raise NodeFormatError("a bucket must be an object")
        allowed = ("type", "role", "content", "model", "provider", "agent_name")
        unknown = sorted(str(k) for k in data if k not in allowed)
        if unknown:
            raise NodeFormatError(f"unknown bucket field(s): {', '.join(unknown)}")
        if "type" not in data or "role" not in data:
            raise NodeFormatError("a bucket needs 'type' and 'role'")
        raw = data.get("content") or []
        if not isinstance(raw, list | tuple):
            raise NodeFormatError("bucket 'content' must be a list of blocks")
        return cls(
            type=data["type"],
            role=data["role"],
            content=tuple(ContentBlock.from_dict(b) for b in raw),
            model=data.get("model"),
            provider=data.get("provider"),
            agent_name=data.get("agent_name"),
        )

    def to_dict(self, *, copy: bool = True) -> dict[str, Any]:
        """``{"type", "role", "content": [block objects]}`` plus ``model``, ``provider`` and
        ``agent_name`` when set. Not the hashed form: see :func:`node_hash`.

        Args:
            copy: as in :meth:`ContentBlock.to_dict`: ``False`` shares the blocks' nested
                values (encode the result at once; never modify or keep it).
        """
        out: dict[str, Any] = {
            "type": self.type,
            "role": self.role,
            "content": [b.to_dict(copy=copy) for b in self.content],
        }
        for name in ("model", "provider", "agent_name"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def _hashed(self, copy: bool) -> dict[str, Any]:
        return {
            "type": self.type,
            "role": self.role,
            "content": [b.to_dict(copy=copy) for b in project_content(self.content)],
        }

    def hashed_content(self) -> dict[str, Any]:
        """The ``content`` member of the node-hash preimage: ``{"type", "role", "content":
        [projected block objects]}`` (DESIGN section 3). Nested values are copies."""
        return self._hashed(copy=True)

    def hashed_bytes(self) -> bytes:
        """``canonical.dumps(self.hashed_content())``, computed without copying nested values.

        Returns:
            The RFC 8785 bytes of the ``content`` member of the node-hash preimage. Keys are
            sorted, so the bytes start with ``b'{"content":[]'`` exactly when the bucket
            projects to nothing (no block survives the projection).

        Raises:
            CanonicalizationError: a value outside the canonical domain (cannot happen for
                blocks built through :class:`ContentBlock`, which validates).
        """
        try:
            return _hashed_bytes(self.content, self.role, self.type)
        except (_Careful, CanonicalizationError, UnicodeEncodeError):
            # canonical.dumps of the whole decides: the same bytes, or its error.
            return canonical.dumps(self._hashed(copy=False))

    def to_json(self) -> bytes:
        """``canonical.dumps(self.to_dict())`` (RFC 8785), computed without copying nested
        values: the stored form of a bucket (e.g. the SQLite node store's ``bucket`` column).

        Raises:
            CanonicalizationError: a value outside the canonical domain (cannot happen for
                blocks built through :class:`ContentBlock`, which validates).
        """
        return canonical.dumps(self.to_dict(copy=False))


class _Careful(Exception):
    """A value :func:`_hashed_bytes` leaves to ``canonical.dumps`` of the whole (a subclass, a
    scalar ``content``, a value bypassing the block checks)."""


def _nested(value: Any) -> bytes:
    """``canonical.dumps`` of a block's ``tool_input`` or ``content`` container, at the depth
    it has in the hashed form: three containers around it (the bucket's object, its
    ``content`` list, the block), so a depth error is the whole value's."""
    if type(value) is not dict and type(value) is not list:
        raise _Careful
    return canonical.dumps([[[value]]])[3:-3]


_ESCAPE: Final[Callable[[str], str]] = json.encoder.encode_basestring
"""The stdlib's C string escaper, which writes RFC 8785 strings (``canonical.dumps`` of a
``str`` is its result in UTF-8; a lone surrogate fails the UTF-8 encoding)."""

_ESCAPED_BUT_NEWLINE: Final = bytes(range(10)) + bytes(range(11, 32)) + b'"\\'
"""The UTF-8 bytes RFC 8785 escapes in a string (``"``, ``\\``, U+0000..U+001F), but the
newline: a text holding none of them is escaped by writing each newline as ``\\n``."""

_LONG_ESCAPED: Final = bytes(range(8)) + b"\x0b" + bytes(range(14, 32))
"""The control characters escaped as ``\\u00hh``: all but the five with a short escape."""

_SHORT_ESCAPES: Final = (
    (b'"', b'\\"'),
    (b"\n", b"\\n"),
    (b"\t", b"\\t"),
    (b"\r", b"\\r"),
    (b"\b", b"\\b"),
    (b"\f", b"\\f"),
)
"""The short escapes but the backslash's (written first), as the C escaper writes them."""


def _text(value: str) -> bytes:
    """``canonical.dumps(value)`` of an exact ``str`` without its quotes, for long texts:
    most hold no character to escape but newlines, which two byte passes over the UTF-8 (a
    check and a replace) escape faster than the C escaper's per-character loop; a text with
    only short escapes (quotes, backslashes, tabs, ...) takes one byte pass more and a
    ``replace`` per kind; the rest goes to the C escaper.

    Raises:
        UnicodeEncodeError: a lone surrogate.
    """
    data = value.encode()
    size = len(data)
    if len(data.translate(None, _ESCAPED_BUT_NEWLINE)) == size:
        return data.replace(b"\n", b"\\n")
    if len(data.translate(None, _LONG_ESCAPED)) == size:
        data = data.replace(b"\\", b"\\\\")  # first: the others write backslashes
        for char, escaped in _SHORT_ESCAPES:
            data = data.replace(char, escaped)
        return data
    return _ESCAPE(value).encode()[1:-1]


_NAMES: Final[dict[str, bytes]] = {}
"""Escaped block types, roles and bucket types seen so far (a few short strings)."""


def _name(value: str) -> bytes:
    """``canonical.dumps(value)`` of a short exact ``str`` that repeats (a type or a role),
    remembered (up to 256 of them)."""
    out = _NAMES.get(value)
    if out is None:
        out = _ESCAPE(value).encode()
        if len(_NAMES) < 256 and len(value) <= 64:
            _NAMES[value] = out
    return out


def _string(value: Any) -> bytes:
    """``canonical.dumps(value)`` of a short string field (an id, a name, a MIME type);
    anything but an exact ``str`` raises :class:`_Careful`."""
    if type(value) is not str:
        raise _Careful
    return _ESCAPE(value).encode()


def _hashed_bytes(blocks: tuple[ContentBlock, ...], role: str, kind: str) -> bytes:
    """``canonical.dumps({"type": kind, "role": role, "content": [b.to_dict(copy=False) for b
    in project_content(blocks)]})``, projecting and encoding each block in one pass: the
    members of each projected block in RFC 8785 key order (``content``, ``image_base64``,
    ``image_url``, ``is_error``, ``media_type``, ``text``, ``thinking``, ``tool_input``,
    ``tool_name``, ``tool_output``, ``tool_result_id``, ``tool_use_id``, ``type``; the
    projection drops ``thinking_signature``), each string escaped as the C escaper does (long
    texts by :func:`_text`), without the projected blocks, their dicts, the key sorting and
    the type walk of the general encoder. ``tests/dag/test_hashed_bytes.py`` checks it
    against the definition.

    A block keeps ``content`` and ``tool_input`` as ``None`` or a non-empty value (the
    :class:`ContentBlock` invariant), so ``is not None`` is ``to_dict``'s emptiness test; a
    ``content`` emptied after construction goes to ``canonical.dumps`` of the whole, and a
    ``tool_input`` that pruning leaves equal is hashed as held, as :func:`project_content`
    does.

    Raises:
        _Careful: a value for ``canonical.dumps`` of the whole to decide (a subclass, a
            scalar ``content``); so do ``UnicodeEncodeError`` (a lone surrogate) and a
            ``CanonicalizationError`` of a nested value.
        ContentBlockError: what :func:`project_content` raises (a ``tool_input`` too deep
            to prune), at the same block.
    """
    str_ = str
    out: list[bytes] = [b'{"content":[']
    first = True
    for block in blocks:
        if type(block) is not ContentBlock:
            raise _Careful
        text = block.text
        if text:
            if type(text) is not str_:
                raise _Careful
            text = project_text(text)
            if not text:
                continue  # the projection drops the block
        if first:
            first = False
            head = b"{"
        else:
            head = b",{"
        content = block.content
        if content is not None:
            if not content:  # emptied after construction (the invariant broken): the whole
                raise _Careful
            out += (head, b'"content":', _nested(content), b",")
        else:
            out.append(head)
        value = block.image_base64
        if value:
            out += (b'"image_base64":', _string(value), b",")
        value = block.image_url
        if value:
            out += (b'"image_url":', _string(value), b",")
        is_error = block.is_error
        if is_error is True:
            out.append(b'"is_error":true')
        elif is_error is False:
            out.append(b'"is_error":false')
        else:
            raise _Careful
        value = block.media_type
        if value:
            out += (b',"media_type":', _string(value))
        if text:
            out += (b',"text":"', _text(text), b'"')
        value = block.thinking
        if value:
            if type(value) is not str_:
                raise _Careful
            out += (b',"thinking":"', _text(value), b'"')
        tool_input = block.tool_input
        if tool_input is not None:
            if type(tool_input) is not dict:
                raise _Careful
            pruned = prune_tool_input(tool_input)
            if pruned == tool_input:  # as project_content: the block's own value is hashed
                pruned = tool_input
            if pruned:
                out += (b',"tool_input":', _nested(pruned))
        value = block.tool_name
        if value:
            out += (b',"tool_name":', _string(value))
        value = block.tool_output
        if value:
            if type(value) is not str_:
                raise _Careful
            value = project_text(value)
            if value:
                out += (b',"tool_output":"', _text(value), b'"')
        value = block.tool_result_id
        if value:
            out += (b',"tool_result_id":', _string(value))
        value = block.tool_use_id
        if value:
            out += (b',"tool_use_id":', _string(value))
        value = block.type
        if type(value) is not str_:
            raise _Careful
        out += (b',"type":', _name(value), b"}")
    if type(role) is not str_ or type(kind) is not str_:
        raise _Careful
    out += (b'],"role":', _name(role), b',"type":', _name(kind), b"}")
    return b"".join(out)


def node_hash(bucket: Bucket, parent_hash: str | None) -> str:
    """The id of a node (DESIGN section 3, MUST; tapes ``merkle.NewNode``).

    Args:
        bucket: the node's message.
        parent_hash: the parent's id (64-char lowercase hex), or ``None`` (or ``""``) for a
            root.

    Returns:
        64-char lowercase hex SHA-256 of the RFC 8785 bytes of
        ``{"parent": parent_hash or "", "content": bucket.hashed_content()}``.

    Raises:
        DagError: ``bucket`` is not a :class:`Bucket`.
        CanonicalizationError: a value inside a block outside the canonical domain (cannot
            happen for blocks built through :class:`ContentBlock`, which validates), or a
            ``parent_hash`` outside it.
    """
    if not isinstance(bucket, Bucket):
        raise DagError(f"bucket must be a Bucket, not {type(bucket).__name__}")
    return node_digest(bucket.hashed_bytes(), parent_hash)


def node_digest(hashed: bytes, parent_hash: str | None) -> str:
    """The node id from the canonical bytes of the hashed content (:meth:`Bucket.hashed_bytes`).

    The preimage ``{"content": ..., "parent": ...}`` is assembled from bytes: RFC 8785 sorts
    ``content`` before ``parent``, and a 64-char hex parent (or ``""``) needs no escaping, so
    ``node_digest(bucket.hashed_bytes(), p) == node_hash(bucket, p)`` without encoding the
    content twice. Any other parent value is encoded by :func:`canonical.dumps`.

    Args:
        hashed: ``bucket.hashed_bytes()``.
        parent_hash: the parent's id (64-char lowercase hex), or ``None``/``""`` for a root.

    Returns:
        64-char lowercase hex SHA-256.

    Raises:
        CanonicalizationError: a parent value outside the canonical domain.
    """
    parent: Any = parent_hash or ""
    if parent == "" or (type(parent) is str and HEX64.fullmatch(parent)):
        encoded = b'"' + parent.encode("ascii") + b'"}'
    else:
        encoded = canonical.dumps(parent) + b"}"
    digest = hashlib.sha256(b'{"content":')
    digest.update(hashed)  # fed in pieces: the content bytes are not copied
    digest.update(b',"parent":')
    digest.update(encoded)
    return digest.hexdigest()


def _plain_leaf(value: Any) -> bool:
    t = type(value)
    return (
        (t is str and value.isascii())
        or value is None
        or t is bool
        or (t is int and -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER)
    )


def _plain_metadata(metadata: dict[Any, Any]) -> bool:
    """A quick test of the usual metadata shape (ASCII ``str`` keys; values that are ASCII
    strings, ``None``, bools, safe integers, or lists of those): ``True`` only where
    :func:`~merkle_memory._json.plain_json` would keep the value as it is; anything else is
    left to it. (The leaf test of :func:`_plain_leaf`, inlined for the usual types.)"""
    for key, value in metadata.items():
        if type(key) is not str or not key.isascii():
            return False
        t = type(value)
        if t is str:
            if not value.isascii():
                return False
        elif t is list:
            for item in value:
                t = type(item)
                if t is str:
                    if not item.isascii():
                        return False
                elif not _plain_leaf(item):
                    return False
        elif not _plain_leaf(value):
            return False
    return True


def _check_hex(value: Any, what: str) -> None:
    """Raise :class:`NodeFormatError` unless ``value`` is 64-char lowercase hex."""
    if not isinstance(value, str) or not HEX64.fullmatch(value):
        raise NodeFormatError(f"{what} must be 64-char lowercase hex: {value!r:.80}")


@dataclass(frozen=True, slots=True, eq=True)
class Node:
    """One conversation turn in the DAG (tapes ``merkle.Node``).

    Attributes:
        hash: the node id, 64-char lowercase hex (``node_hash(bucket, parent_hash)`` for a node
            built by :meth:`create`; a node read from storage may carry any value, which
            :attr:`valid` checks).
        parent_hash: the parent's id, or ``None`` for a root.
        bucket: the message.
        metadata: data kept beside the node but not hashed (source uuids, timestamps, model,
            ``isSidechain``, ``parent_tool_use_id``, ...); a JSON object.

    Raises:
        NodeFormatError: on construction, a hash or parent hash that is not 64-char
            lowercase hex, a bucket that is not a :class:`Bucket`, or metadata that is not a
            JSON object (or nests deeper than the 508 levels of ``ContentBlock`` values).
    """

    hash: str
    parent_hash: str | None
    bucket: Bucket
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._check()
        metadata = json_copy(self.metadata, "node metadata", NodeFormatError)
        object.__setattr__(self, "metadata", metadata)

    def _check(self) -> None:
        """Check every field but the metadata's content (the constructor's errors, in order)."""
        _check_hex(self.hash, "node hash")
        if self.parent_hash is not None:
            _check_hex(self.parent_hash, "parent hash")
        if not isinstance(self.bucket, Bucket):
            raise NodeFormatError("node bucket must be a Bucket")
        if type(self.metadata) is not dict and not isinstance(self.metadata, Mapping):
            raise NodeFormatError("node metadata must be a JSON object")

    @classmethod
    def from_parsed(
        cls,
        hash: str,
        parent_hash: str | None,
        bucket: Bucket,
        metadata: Mapping[str, Any],
    ) -> Node:
        """A node made from metadata the caller gives up (e.g. a dict an importer has just
        built from parsed values): validated as by the constructor, with the same results and
        errors, but the metadata is kept rather than copied when its copy would equal it
        (:func:`~merkle_memory._json.plain_json`: an exact ``dict`` of exact JSON types, safe
        integers, finite floats, no lone surrogate, 508 levels at most; anything else is
        copied, or refused, as by the constructor).

        Args:
            hash: the node id, 64-char lowercase hex.
            parent_hash: the parent's id, or ``None`` for a root.
            bucket: the message.
            metadata: a JSON object the caller must neither keep nor change afterwards.

        Raises:
            NodeFormatError: as the constructor.
        """
        if cls is not Node:  # a subclass: its own layout, the plain way
            node = object.__new__(cls)
            init = object.__setattr__
            init(node, "hash", hash)
            init(node, "parent_hash", parent_hash)
            init(node, "bucket", bucket)
            init(node, "metadata", metadata)
            node._check()
            if type(metadata) is not dict or not _plain_metadata(metadata):
                init(node, "metadata", plain_json(metadata, "node metadata", NodeFormatError))
            return node
        # The checks of _check, in its order, inlined for exact types; then the fields go
        # into a mutable twin that becomes the Node (see _NodeDraft).
        if type(hash) is not str or HEX64.fullmatch(hash) is None:
            _check_hex(hash, "node hash")
        if parent_hash is not None and (
            type(parent_hash) is not str or HEX64.fullmatch(parent_hash) is None
        ):
            _check_hex(parent_hash, "parent hash")
        if type(bucket) is not Bucket and not isinstance(bucket, Bucket):
            raise NodeFormatError("node bucket must be a Bucket")
        if type(metadata) is not dict:
            if not isinstance(metadata, Mapping):
                raise NodeFormatError("node metadata must be a JSON object")
            metadata = plain_json(metadata, "node metadata", NodeFormatError)
        elif not _plain_metadata(metadata):
            metadata = plain_json(metadata, "node metadata", NodeFormatError)
        draft = _NodeDraft()
        draft.hash = hash
        draft.parent_hash = parent_hash
        draft.bucket = bucket
        draft.metadata = metadata
        draft.__class__ = Node  # type: ignore[assignment]
        return draft  # type: ignore[return-value]

    def __hash__(self) -> int:
        return hash(self.hash)

    @classmethod
    def create(
        cls,
        bucket: Bucket,
        parent_hash: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Node:
        """A node whose ``hash`` is computed: ``node_hash(bucket, parent_hash)``.

        Raises:
            NodeFormatError: a malformed parent hash or metadata (see :class:`Node`).
        """
        return cls(node_hash(bucket, parent_hash), parent_hash or None, bucket, metadata or {})

    @property
    def valid(self) -> bool:
        """Whether ``hash`` equals ``node_hash(bucket, parent_hash)`` (compared in constant
        time). A stored node whose content or parent was altered is not valid."""
        return hmac.compare_digest(self.hash, node_hash(self.bucket, self.parent_hash))

    def to_dict(self) -> dict[str, Any]:
        """``{"hash", "parent_hash" (hex or None), "bucket": Bucket.to_dict(), "metadata"}``."""
        return {
            "hash": self.hash,
            "parent_hash": self.parent_hash,
            "bucket": self.bucket.to_dict(),
            "metadata": json_copy(self.metadata, "node metadata"),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Node:
        """Inverse of :meth:`to_dict`. The hash is taken as given (check :attr:`valid`).

        Raises:
            NodeFormatError: not an object, a missing or malformed member.
        """
        if not isinstance(data, Mapping) or "hash" not in data or "bucket" not in data:
            raise NodeFormatError("a node needs 'hash' and 'bucket'")
        return cls(
            hash=data["hash"],
            parent_hash=data.get("parent_hash") or None,
            bucket=Bucket.from_dict(data["bucket"]),
            metadata=data.get("metadata") or {},
        )

    def with_metadata(self, **extra: Any) -> Node:
        """A copy of this node with ``extra`` merged into its metadata (hash unchanged)."""
        return dataclasses.replace(self, metadata={**self.metadata, **extra})


class _NodeDraft:
    """A mutable twin of :class:`Node` (the same slots, in the same order), filled by
    :meth:`Node.from_parsed` before it becomes a ``Node`` by ``__class__`` assignment: four
    ``object.__setattr__`` calls on the frozen dataclass cost more, for every imported node."""

    __slots__ = Node.__slots__
    hash: str
    parent_hash: str | None
    bucket: Bucket
    metadata: Mapping[str, Any]
