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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import canonical
from .._json import HEX64, check_text, json_copy, plain_json
from ..blocks import ContentBlock
from ..canonical import MAX_SAFE_INTEGER
from ..errors import CanonicalizationError, DagError, NodeFormatError
from ..projection import project_content

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
            return _hashed_bytes(project_content(self.content), self.role, self.type)
        except (_Careful, CanonicalizationError):
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


def _block_bytes(block: ContentBlock) -> bytes:
    """``canonical.dumps(block.to_dict(copy=False))``: the members present, in key order.

    A block keeps ``content`` and ``tool_input`` as ``None`` or a non-empty value (the
    :class:`ContentBlock` invariant), so ``is not None`` is ``to_dict``'s emptiness test. A
    string that is not exactly ``str`` makes ``canonical.dumps`` raise, as in the whole.
    """
    dumps = canonical.dumps
    if type(block.is_error) is not bool:
        raise _Careful
    out = []
    if block.content is not None:
        out.append(b'"content":' + _nested(block.content))
    if block.image_base64:
        out.append(b'"image_base64":' + dumps(block.image_base64))
    if block.image_url:
        out.append(b'"image_url":' + dumps(block.image_url))
    out.append(b'"is_error":true' if block.is_error else b'"is_error":false')
    if block.media_type:
        out.append(b'"media_type":' + dumps(block.media_type))
    if block.text:
        out.append(b'"text":' + dumps(block.text))
    if block.thinking:
        out.append(b'"thinking":' + dumps(block.thinking))
    if block.thinking_signature:
        out.append(b'"thinking_signature":' + dumps(block.thinking_signature))
    if block.tool_input is not None:
        out.append(b'"tool_input":' + _nested(block.tool_input))
    if block.tool_name:
        out.append(b'"tool_name":' + dumps(block.tool_name))
    if block.tool_output:
        out.append(b'"tool_output":' + dumps(block.tool_output))
    if block.tool_result_id:
        out.append(b'"tool_result_id":' + dumps(block.tool_result_id))
    if block.tool_use_id:
        out.append(b'"tool_use_id":' + dumps(block.tool_use_id))
    out.append(b'"type":' + dumps(block.type))
    return b"{" + b",".join(out) + b"}"


def _hashed_bytes(blocks: list[ContentBlock], role: str, kind: str) -> bytes:
    """``canonical.dumps({"type": kind, "role": role, "content": [b.to_dict(copy=False) for
    b in blocks]})``, assembled from the canonical bytes of the members (RFC 8785 key order:
    ``content``, ``role``, ``type``; in a block, :func:`_block_bytes`), without the dicts,
    the key sorting and the type walk of the general encoder around the strings.
    ``tests/dag/test_hashed_bytes.py`` checks it against ``canonical.dumps``.

    Raises:
        _Careful: a value for ``canonical.dumps`` of the whole to decide.
        CanonicalizationError: a member outside the canonical domain (a lone surrogate).
    """
    members = b",".join([_block_bytes(b) for b in blocks])
    dumps = canonical.dumps
    return b'{"content":[%b],"role":%b,"type":%b}' % (members, dumps(role), dumps(kind))


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
    left to it."""
    for key, value in metadata.items():
        if type(key) is not str or not key.isascii():
            return False
        if type(value) is list:
            for item in value:
                if not _plain_leaf(item):
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
