"""Content blocks of a conversation turn (re-exported by :mod:`merkle_memory.dag`).

:class:`ContentBlock` carries tapes' ``llm.ContentBlock`` fields and JSON keys; its
``to_dict()`` is the hashed form (DESIGN section 3).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from . import canonical
from ._json import check_text, has_surrogate, json_copy, plain_json
from .errors import ContentBlockError

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


_PROJECTED: Final = frozenset({"text", "tool_input", "tool_output", "thinking_signature"})
"""The fields :meth:`ContentBlock.projected` may change."""


_DEFAULTS: Final = (
    *((name, "") for name in _STR_FIELDS[:6]),
    ("tool_input", None),
    *((name, "") for name in _STR_FIELDS[6:8]),
    ("is_error", False),
    *((name, "") for name in _STR_FIELDS[8:]),
    ("content", None),
)
"""Every field but ``type`` with its default, in field order (for ``from_parsed``)."""


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
    as ``None``. Dicts and lists are copied on construction, so a block never changes
    through the values it was given; the copies it holds are reachable (``block.tool_input``)
    and must not be changed either: the checks ran on construction, and hashes read them as
    they are then.
    ``tool_input`` and ``content`` nest at most ``MAX_VALUE_DEPTH`` = ``canonical.MAX_DEPTH -
    4`` = 508 levels (the value itself is level 1), so the node-hash preimage that holds them
    four levels down stays within ``canonical.MAX_DEPTH``; they are walked without recursion.

    Raises:
        ContentBlockError: on construction, a field of the wrong type, an empty ``type``,
            or a value with no JSON meaning (NaN, a set, a lone surrogate, ...), or nested
            deeper than 508 levels (text ``"block field 'tool_input': nested deeper than 508
            levels (canonical.MAX_DEPTH - 4)"``; a cyclic value included).
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
        self._check(copy=True, surrogates=True)

    def _check(self, *, copy: bool, surrogates: bool) -> None:
        """Validate the fields; store ``tool_input`` and ``content`` as checked values (copies
        with ``copy``, else the values themselves where :func:`plain_json` allows)."""
        if not isinstance(self.type, str) or not self.type:
            raise ContentBlockError(f"block type must be a non-empty string: {self.type!r}")
        check_text(self.type, "block type")
        for name in _STR_FIELDS:
            value = getattr(self, name)
            if type(value) is not str:
                if not isinstance(value, str):
                    raise ContentBlockError(
                        f"block field {name!r} must be a string, not {type(value).__name__}"
                    )
            elif not surrogates or not value or value.isascii():
                continue  # the common case: nothing to check
            if has_surrogate(value):
                check_text(value, f"block field {name!r}")
        if not isinstance(self.is_error, bool):
            raise ContentBlockError("block field 'is_error' must be a bool")
        self._check_values(copy=copy, surrogates=surrogates)

    def _check_values(self, *, copy: bool, surrogates: bool) -> None:
        """The part of :meth:`_check` after the string fields and ``is_error``: store
        ``tool_input`` and ``content`` as checked values."""
        if self.tool_input is not None:
            if not isinstance(self.tool_input, Mapping):
                raise ContentBlockError(
                    "block field 'tool_input' must be a JSON object, "
                    f"not {type(self.tool_input).__name__}"
                )
            where = "block field 'tool_input'"
            tool_input = (
                json_copy(self.tool_input, where)
                if copy
                else plain_json(self.tool_input, where, surrogates=surrogates)
            )
            object.__setattr__(self, "tool_input", tool_input or None)
        if self.content is not None:
            where = "block field 'content'"
            content = (
                json_copy(self.content, where)
                if copy
                else plain_json(self.content, where, surrogates=surrogates)
            )
            object.__setattr__(self, "content", None if _empty(content) else content)

    @classmethod
    def from_parsed(cls, type: str, *, surrogate_free: bool = False, **fields: Any) -> ContentBlock:
        """A block made from values the caller gives up, e.g. ones ``json.loads`` has just
        produced: validated as by the constructor, with the same results and errors, but
        ``tool_input`` and ``content`` are kept rather than copied when their copy would
        equal them (:func:`~merkle_memory._json.plain_json`: exact JSON types, safe integers,
        finite floats, 508 levels at most; anything else is copied, or refused, as usual).

        Args:
            type: the block type.
            surrogate_free: ``True`` when no string among the fields (and inside their values)
                can hold a lone surrogate: text parsed from UTF-8 without a ``\\ud`` escape,
                or cleaned of surrogates. Strings are then only type-checked. Leave ``False``
                unless that is certain: a surrogate let through fails later, in hashing.
            fields: the other fields by name (as for the constructor). The caller must
                neither keep nor change the ``tool_input`` and ``content`` values given.

        Raises:
            ContentBlockError: as the constructor.
            TypeError: a keyword that is not a field.
        """
        if not _FIELD_NAMES.issuperset(fields):
            unknown = sorted(name for name in fields if name not in _FIELD_NAMES)
            raise TypeError(f"unknown content block field(s): {', '.join(unknown)}")
        surrogates = not surrogate_free
        if cls is not ContentBlock:  # a subclass: its own layout, the plain way
            block = object.__new__(cls)
            object.__setattr__(block, "type", type)
            for name, default in _DEFAULTS:
                object.__setattr__(block, name, fields.get(name, default))
            block._check(copy=False, surrogates=surrogates)
            return block
        draft = _blank()
        draft.type = type
        # Exact strings (ASCII ones, or any when surrogate-free) and a bool need no more
        # checks; anything else takes the full check, which raises the constructor's error.
        plain = builtins.type(type) is str and type != "" and type.isascii()
        values = False  # a tool_input or content given: checked below
        str_ = str
        for name, value in fields.items():
            setattr(draft, name, value)
            if not plain:
                continue
            if name in _STR_FIELD_NAMES:
                if builtins.type(value) is not str_ or (surrogates and not value.isascii()):
                    plain = False
            elif name == "is_error":
                if builtins.type(value) is not bool:
                    plain = False
            elif value is not None:
                values = True
        block = _finish(draft)
        if not plain:
            block._check(copy=False, surrogates=surrogates)
        elif values:
            block._check_values(copy=False, surrogates=surrogates)
        return block

    def __hash__(self) -> int:
        return hash(canonical.dumps(self.to_dict()))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ContentBlock:
        """Build a block from its JSON object (the form :meth:`to_dict` writes).

        Args:
            data: an object with ``type`` and any of the other field names as keys; a key whose
                value is ``null`` counts as absent.

        Raises:
            ContentBlockError: ``data`` is not an object, lacks ``type``, has a key that is
                not a field, or a value of the wrong type.
        """
        if not isinstance(data, Mapping):
            raise ContentBlockError(f"a content block must be an object: {data!r:.80}")
        unknown = sorted(str(k) for k in data if k not in cls.FIELDS)
        if unknown:
            raise ContentBlockError(f"unknown content block field(s): {', '.join(unknown)}")
        if "type" not in data:
            raise ContentBlockError("a content block needs a 'type'")
        kwargs = {k: v for k, v in data.items() if v is not None}
        return cls(**kwargs)

    def to_dict(self, *, copy: bool = True) -> dict[str, Any]:
        """The block's JSON object, which is also its hashed form (DESIGN section 3, MUST).

        Args:
            copy: ``True`` (the default) copies the nested ``tool_input`` and ``content``
                values; ``False`` returns the block's own (for encoding at once, as hashing
                does: the caller must neither modify nor keep them, or the frozen block
                changes).

        Returns:
            A new dict that always has ``type`` and ``is_error`` (a bool); every other field
            appears only when non-empty (not ``None``, ``""``, ``{}``, ``[]``), in the order
            of :attr:`FIELDS`.
        """
        # Unrolled on purpose, a deliberate twin of a loop over FIELDS: every node hash encodes
        # every block through here, and the loop with getattr is more than twice as slow.
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
            out["tool_input"] = (
                json_copy(self.tool_input, "tool_input") if copy else self.tool_input
            )
        if self.tool_result_id:
            out["tool_result_id"] = self.tool_result_id
        if self.tool_output:
            out["tool_output"] = self.tool_output
        if self.thinking:
            out["thinking"] = self.thinking
        if self.thinking_signature:
            out["thinking_signature"] = self.thinking_signature
        if not _empty(self.content):
            out["content"] = json_copy(self.content, "content") if copy else self.content
        return out

    def projected(self, changes: Mapping[str, Any]) -> ContentBlock:
        """This block with the changes of the projection applied (DESIGN section 3), for
        :func:`~merkle_memory.projection.project_content`.

        The new values are not validated again, which keeps hashing fast: they must be derived
        from this block's own by removal only (``text`` and ``tool_output`` with tags and
        whitespace cut, ``tool_input`` pruned, ``thinking_signature`` cleared), and a removal
        cannot turn a valid value into an invalid one.

        Args:
            changes: new values by field name.

        Raises:
            ContentBlockError: a key of ``changes`` is not ``text``, ``tool_input``,
                ``tool_output`` or ``thinking_signature``.
        """
        if not _PROJECTED.issuperset(changes):
            unknown = sorted(str(k) for k in changes if k not in _PROJECTED)
            raise ContentBlockError(f"a projection cannot change {', '.join(unknown)}")
        if builtins.type(self) is not ContentBlock:  # a subclass: its own layout
            new = object.__new__(ContentBlock)
            for name in self.FIELDS:
                value = changes[name] if name in changes else getattr(self, name)
                object.__setattr__(new, name, value)
            return new
        draft = _draft(self)
        for name, value in changes.items():
            setattr(draft, name, value)
        return _finish(draft)


class _Draft:
    """A mutable twin of :class:`ContentBlock` (the same slots, in the same order), in which a
    new block is filled quickly before it becomes a ``ContentBlock`` by ``__class__``
    assignment (:func:`_finish`): setting 14 slots of a frozen dataclass one
    ``object.__setattr__`` at a time costs several times more, for every block of an import."""

    __slots__ = ContentBlock.__slots__
    type: str
    text: str
    image_url: str
    image_base64: str
    media_type: str
    tool_use_id: str
    tool_name: str
    tool_input: Any
    tool_result_id: str
    tool_output: str
    is_error: bool
    thinking: str
    thinking_signature: str
    content: Any


def _draft(source: ContentBlock | _Draft) -> _Draft:
    """A draft holding every field of ``source`` (one line per field of ``FIELDS``)."""
    draft = _Draft()
    draft.type = source.type
    draft.text = source.text
    draft.image_url = source.image_url
    draft.image_base64 = source.image_base64
    draft.media_type = source.media_type
    draft.tool_use_id = source.tool_use_id
    draft.tool_name = source.tool_name
    draft.tool_input = source.tool_input
    draft.tool_result_id = source.tool_result_id
    draft.tool_output = source.tool_output
    draft.is_error = source.is_error
    draft.thinking = source.thinking
    draft.thinking_signature = source.thinking_signature
    draft.content = source.content
    return draft


def _blank() -> _Draft:
    """A draft with every field at its default (``type`` empty): the start of
    :meth:`ContentBlock.from_parsed` (one line per field of ``FIELDS``)."""
    draft = _Draft()
    draft.type = ""
    draft.text = ""
    draft.image_url = ""
    draft.image_base64 = ""
    draft.media_type = ""
    draft.tool_use_id = ""
    draft.tool_name = ""
    draft.tool_input = None
    draft.tool_result_id = ""
    draft.tool_output = ""
    draft.is_error = False
    draft.thinking = ""
    draft.thinking_signature = ""
    draft.content = None
    return draft


def _finish(draft: _Draft) -> ContentBlock:
    """The draft, now a :class:`ContentBlock` (frozen from here on)."""
    draft.__class__ = ContentBlock  # type: ignore[assignment]
    return draft  # type: ignore[return-value]


_FIELD_NAMES: Final = frozenset(ContentBlock.FIELDS[1:])
"""The keyword fields of :meth:`ContentBlock.from_parsed` (every field but ``type``)."""
_STR_FIELD_NAMES: Final = frozenset(_STR_FIELDS)
