"""Conversation turns as a Merkle DAG: content blocks, buckets, nodes and their hashes.

A :class:`Node` is one message of a conversation (a :class:`Bucket` of :class:`ContentBlock`)
plus the hash of its parent. Its id is (DESIGN section 3, MUST; tapes ``pkg/merkle``)::

    digest({"parent": parent_hash or "",
            "content": {"type": bucket.type, "role": bucket.role,
                        "content": [b.to_dict() for b in project_content(bucket.content)]}})

so a node id commits to the whole conversation before it, and harness noise removed by
:func:`~merkle_memory.projection.project_content` does not change it. Model, provider, agent
name and all other metadata are not hashed.

:class:`Dag` (one root) and :class:`Forest` (any number of roots) index nodes in memory with
tapes' ``Dag`` semantics; their ``leaves()`` and ``branch_points()`` come in insertion order.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from . import canonical
from ._graph import Dag, DagNode, Forest
from ._jsonvalue import check_text, has_surrogate, json_copy
from .errors import TranscriptFormatError
from .projection import project_content

__all__ = [
    "Bucket",
    "ContentBlock",
    "Dag",
    "DagNode",
    "Forest",
    "Node",
    "node_digest",
    "node_hash",
]

_HEX64: Final = re.compile(r"[0-9a-f]{64}")

_STR_FIELDS: Final = (
    "text",
    "image_url",
    "image_base64",
    "media_type",
    "tool_use_id",
    "tool_name",
    "tool_result_id",
    "tool_output",
    "thinking",
    "thinking_signature",
)


def _empty(value: Any) -> bool:
    return value is None or (isinstance(value, str | dict | list) and len(value) == 0)


@dataclass(frozen=True, slots=True)
class ContentBlock:
    """One block of a message, with tapes' ``llm.ContentBlock`` fields and JSON keys.

    Attributes:
        type: block type, e.g. ``"text"``, ``"image"``, ``"tool_use"``, ``"tool_result"``,
            ``"thinking"``; any non-empty string (unknown types are kept as given).
        text: text of a text block.
        image_url: URL of an image given by reference.
        image_base64: base64 data of an inline image.
        media_type: MIME type of an image, e.g. ``"image/png"``.
        tool_use_id: id of a tool call (tool_use / server_tool_use blocks).
        tool_name: name of the tool called.
        tool_input: arguments of a tool call, a JSON object, or ``None``. Integers beyond
            +-(2**53 - 1) are stored as the nearest float (hashed as IEEE doubles, as tapes).
        tool_result_id: the ``tool_use_id`` a tool_result answers.
        tool_output: text output of a tool.
        is_error: whether a tool result reports an error.
        thinking: reasoning text of a thinking block.
        thinking_signature: opaque signature of a thinking block (never hashed).
        content: any other parsed JSON value (e.g. a server tool's raw result, or the non-text
            parts of a tool result), or ``None``.

    Empty values (``""``, ``None``, ``{}``, ``[]``) mean "absent"; ``{}`` and ``[]`` are stored
    as ``None``. Dicts and lists are copied on construction, so a block never changes.

    Raises:
        TranscriptFormatError: on construction, a field of the wrong type, an empty ``type``,
            or a value with no JSON meaning (NaN, a set, a lone surrogate, ...).
    """

    type: str
    text: str = ""
    image_url: str = ""
    image_base64: str = ""
    media_type: str = ""
    tool_use_id: str = ""
    tool_name: str = ""
    tool_input: Mapping[str, Any] | None = None
    tool_result_id: str = ""
    tool_output: str = ""
    is_error: bool = False
    thinking: str = ""
    thinking_signature: str = ""
    content: Any = None

    FIELDS: ClassVar[tuple[str, ...]] = (
        "type",
        "text",
        "image_url",
        "image_base64",
        "media_type",
        "tool_use_id",
        "tool_name",
        "tool_input",
        "tool_result_id",
        "tool_output",
        "is_error",
        "thinking",
        "thinking_signature",
        "content",
    )

    def __post_init__(self) -> None:
        if not isinstance(self.type, str) or not self.type:
            raise TranscriptFormatError(f"block type must be a non-empty string: {self.type!r}")
        check_text(self.type, "block type")
        for name in _STR_FIELDS:
            value = getattr(self, name)
            if type(value) is not str:
                if not isinstance(value, str):
                    raise TranscriptFormatError(
                        f"block field {name!r} must be a string, not {type(value).__name__}"
                    )
            elif not value or value.isascii():
                continue  # the common case: nothing to check
            if has_surrogate(value):
                check_text(value, f"block field {name!r}")
        if not isinstance(self.is_error, bool):
            raise TranscriptFormatError("block field 'is_error' must be a bool")
        if self.tool_input is not None:
            if not isinstance(self.tool_input, Mapping):
                raise TranscriptFormatError(
                    "block field 'tool_input' must be a JSON object, "
                    f"not {type(self.tool_input).__name__}"
                )
            tool_input = json_copy(self.tool_input, "block field 'tool_input'")
            object.__setattr__(self, "tool_input", tool_input or None)
        if self.content is not None:
            content = json_copy(self.content, "block field 'content'")
            object.__setattr__(self, "content", None if _empty(content) else content)

    def __hash__(self) -> int:
        return hash(canonical.dumps(self.to_dict()))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContentBlock:
        """Build a block from its JSON object (the form :meth:`to_dict` writes).

        Args:
            data: an object with ``type`` and any of the other field names as keys; a key whose
                value is ``null`` counts as absent.

        Raises:
            TranscriptFormatError: ``data`` is not an object, lacks ``type``, has a key that is
                not a field, or a value of the wrong type.
        """
        if not isinstance(data, Mapping):
            raise TranscriptFormatError(f"a content block must be an object: {data!r:.80}")
        unknown = sorted(str(k) for k in data if k not in cls.FIELDS)
        if unknown:
            raise TranscriptFormatError(f"unknown content block field(s): {', '.join(unknown)}")
        if "type" not in data:
            raise TranscriptFormatError("a content block needs a 'type'")
        kwargs = {k: v for k, v in data.items() if v is not None}
        return cls(**kwargs)

    def to_dict(self) -> dict[str, Any]:
        """The block's JSON object, which is also its hashed form (DESIGN section 3, MUST).

        Returns:
            A new dict that always has ``type`` and ``is_error`` (a bool); every other field
            appears only when non-empty (not ``None``, ``""``, ``{}``, ``[]``). Nested values
            are copies.
        """
        out = self._shallow_dict()
        if "tool_input" in out:
            out["tool_input"] = json_copy(out["tool_input"], "tool_input")
        if "content" in out:
            out["content"] = json_copy(out["content"], "content")
        return out

    def _shallow_dict(self) -> dict[str, Any]:
        """:meth:`to_dict` without copying nested values (for hashing; must not escape)."""
        out: dict[str, Any] = {"type": self.type, "is_error": self.is_error}
        if self.text:
            out["text"] = self.text
        if self.image_url:
            out["image_url"] = self.image_url
        if self.image_base64:
            out["image_base64"] = self.image_base64
        if self.media_type:
            out["media_type"] = self.media_type
        if self.tool_use_id:
            out["tool_use_id"] = self.tool_use_id
        if self.tool_name:
            out["tool_name"] = self.tool_name
        if not _empty(self.tool_input):
            out["tool_input"] = self.tool_input
        if self.tool_result_id:
            out["tool_result_id"] = self.tool_result_id
        if self.tool_output:
            out["tool_output"] = self.tool_output
        if self.thinking:
            out["thinking"] = self.thinking
        if self.thinking_signature:
            out["thinking_signature"] = self.thinking_signature
        if not _empty(self.content):
            out["content"] = self.content
        return out

    def _evolve(self, changes: Mapping[str, Any]) -> ContentBlock:
        """A copy with ``changes`` applied, without validation: for values derived from this
        already-validated block by :func:`~merkle_memory.projection.project_content` only."""
        new = object.__new__(ContentBlock)
        for name in self.FIELDS:
            value = changes[name] if name in changes else getattr(self, name)
            object.__setattr__(new, name, value)
        return new


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
        TranscriptFormatError: on construction, an empty or non-string ``type``/``role``, a
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
        for name in ("type", "role"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value:
                raise TranscriptFormatError(f"bucket {name} must be a non-empty string")
            check_text(value, f"bucket {name}")
        for name in ("model", "provider", "agent_name"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TranscriptFormatError(f"bucket {name} must be a string or None")
        if not isinstance(self.content, Sequence) or isinstance(self.content, str):
            raise TranscriptFormatError("bucket content must be a sequence of content blocks")
        blocks = tuple(self.content)
        for block in blocks:
            if not isinstance(block, ContentBlock):
                raise TranscriptFormatError(
                    f"bucket content holds a {type(block).__name__}, not a ContentBlock"
                )
        object.__setattr__(self, "content", blocks)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Bucket:
        """Build a bucket from ``{"type", "role", "content": [block objects], ...}``.

        ``model``, ``provider`` and ``agent_name`` are optional keys.

        Raises:
            TranscriptFormatError: not an object, a missing ``type`` or ``role``, an unknown
                key, ``content`` not a list, or a block :meth:`ContentBlock.from_dict` rejects.
        """
        if not isinstance(data, Mapping):
            raise TranscriptFormatError("a bucket must be an object")
        allowed = ("type", "role", "content", "model", "provider", "agent_name")
        unknown = sorted(str(k) for k in data if k not in allowed)
        if unknown:
            raise TranscriptFormatError(f"unknown bucket field(s): {', '.join(unknown)}")
        if "type" not in data or "role" not in data:
            raise TranscriptFormatError("a bucket needs 'type' and 'role'")
        raw = data.get("content") or []
        if not isinstance(raw, list | tuple):
            raise TranscriptFormatError("bucket 'content' must be a list of blocks")
        return cls(
            type=data["type"],
            role=data["role"],
            content=tuple(ContentBlock.from_dict(b) for b in raw),
            model=data.get("model"),
            provider=data.get("provider"),
            agent_name=data.get("agent_name"),
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"type", "role", "content": [block objects]}`` plus ``model``, ``provider`` and
        ``agent_name`` when set. Not the hashed form: see :func:`node_hash`."""
        out: dict[str, Any] = {
            "type": self.type,
            "role": self.role,
            "content": [b.to_dict() for b in self.content],
        }
        for name in ("model", "provider", "agent_name"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    def hashed_content(self) -> dict[str, Any]:
        """The ``content`` member of the node-hash preimage: ``{"type", "role", "content":
        [projected block objects]}`` (DESIGN section 3). Nested values are copies."""
        return {
            "type": self.type,
            "role": self.role,
            "content": [b.to_dict() for b in project_content(self.content)],
        }

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
        return canonical.dumps(
            {
                "type": self.type,
                "role": self.role,
                "content": [b._shallow_dict() for b in project_content(self.content)],
            }
        )


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
        CanonicalizationError: a value inside a block outside the canonical domain (cannot
            happen for blocks built through :class:`ContentBlock`, which validates).
    """
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
    if parent == "" or (type(parent) is str and _HEX64.fullmatch(parent)):
        encoded = b'"' + parent.encode("ascii") + b'"'
    else:
        encoded = canonical.dumps(parent)
    return hashlib.sha256(b'{"content":' + hashed + b',"parent":' + encoded + b"}").hexdigest()


def _check_hex(value: Any, what: str) -> None:
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise TranscriptFormatError(f"{what} must be 64-char lowercase hex: {value!r:.80}")


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
        TranscriptFormatError: on construction, a hash or parent hash that is not 64-char
            lowercase hex, a bucket that is not a :class:`Bucket`, or metadata that is not a
            JSON object.
    """

    hash: str
    parent_hash: str | None
    bucket: Bucket
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_hex(self.hash, "node hash")
        if self.parent_hash is not None:
            _check_hex(self.parent_hash, "parent hash")
        if not isinstance(self.bucket, Bucket):
            raise TranscriptFormatError("node bucket must be a Bucket")
        if not isinstance(self.metadata, Mapping):
            raise TranscriptFormatError("node metadata must be a JSON object")
        object.__setattr__(self, "metadata", json_copy(self.metadata, "node metadata"))

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
            TranscriptFormatError: a malformed parent hash or metadata (see :class:`Node`).
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
            TranscriptFormatError: not an object, a missing or malformed member.
        """
        if not isinstance(data, Mapping) or "hash" not in data or "bucket" not in data:
            raise TranscriptFormatError("a node needs 'hash' and 'bucket'")
        return cls(
            hash=data["hash"],
            parent_hash=data.get("parent_hash") or None,
            bucket=Bucket.from_dict(data["bucket"]),
            metadata=data.get("metadata") or {},
        )

    @classmethod
    def _unchecked(
        cls, hash: str, parent_hash: str | None, bucket: Bucket, metadata: dict[str, Any]
    ) -> Node:
        """A node built without validation, for values an importer has already checked:
        ``hash`` computed by :func:`node_digest`, ``metadata`` a fresh ``json_copy``."""
        node = object.__new__(cls)
        object.__setattr__(node, "hash", hash)
        object.__setattr__(node, "parent_hash", parent_hash)
        object.__setattr__(node, "bucket", bucket)
        object.__setattr__(node, "metadata", metadata)
        return node

    def with_metadata(self, **extra: Any) -> Node:
        """A copy of this node with ``extra`` merged into its metadata (hash unchanged)."""
        return dataclasses.replace(self, metadata={**self.metadata, **extra})
