"""Content blocks of a conversation turn (private; re-exported by :mod:`merkle_memory.dag`).

:class:`ContentBlock` carries tapes' ``llm.ContentBlock`` fields and JSON keys; its
``to_dict()`` is the hashed form (DESIGN section 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from . import canonical
from ._json import check_text, has_surrogate, json_copy
from .errors import TranscriptFormatError

__all__ = ["ContentBlock"]

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
