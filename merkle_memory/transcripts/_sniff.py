"""Private: recognising single-document formats from the first bytes of a file.

Format detection reads ``SNIFF_BYTES`` of a file first (and more, up to ``SNIFF_LIMIT``, while
no format recognises it), and a request body or an agent file is often larger, so the head may
be a cut JSON document. :func:`head_value` parses the head
when it is complete; otherwise the importers fall back to :func:`head_text` and look for keys
and values only their format has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Final

__all__ = [
    "AGENT_KEYS",
    "ANTHROPIC_BLOCK_TYPES",
    "ANTHROPIC_SIGNS",
    "OPENAI_SIGNS",
    "agent_key",
    "body_problem",
    "head_text",
    "head_value",
    "is_object_head",
    "request_signs",
]

AGENT_KEYS: Final = ("core_memory", "in_context_message_indices", "agent_type", "llm_config")
"""Top-level keys of a Letta agent file; a request body has none of them."""

ANTHROPIC_BLOCK_TYPES: Final = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "server_tool_use", "document"}
)
"""Content block types of the Messages API that Chat Completions does not have."""

OPENAI_SIGNS: Final = re.compile(
    r'"role"\s*:\s*"(?:system|developer|tool|function)"|"tool_calls"\s*:|"tool_call_id"\s*:'
    r'|"type"\s*:\s*"image_url"'
)
"""Text only a Chat Completions body holds (roles and keys Anthropic's API does not have)."""

ANTHROPIC_SIGNS: Final = re.compile(
    r'"type"\s*:\s*"(?:tool_use|tool_result|thinking|redacted_thinking)"|"max_tokens"\s*:'
    r'|"system"\s*:|"anthropic_version"\s*:|"cache_control"\s*:'
)
"""Text typical of a Messages API body (block types, top-level keys)."""


def head_value(head: bytes) -> Any:
    """The parsed JSON document of ``head``, or ``None`` when it is not one whole document."""
    try:
        return json.loads(head.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None


def head_text(head: bytes) -> str:
    """``head`` decoded as UTF-8, a sequence cut at the end of the head dropped."""
    return head.decode("utf-8", errors="ignore")


def is_object_head(text: str) -> bool:
    """Whether ``text`` starts (after whitespace and a BOM) with a JSON object that has a
    ``"messages"`` key somewhere in the head."""
    return text.lstrip("\ufeff \t\r\n").startswith("{") and '"messages"' in text


def agent_key(value: Any) -> str | None:
    """The first Letta agent key (:data:`AGENT_KEYS`) of a parsed object, or ``None``."""
    if not isinstance(value, Mapping):
        return None
    return next((key for key in AGENT_KEYS if key in value), None)


def request_signs(head: bytes) -> tuple[int, int] | None:
    """How often OpenAI-only and Anthropic-only text occur in the head of a request body that
    is cut (``(openai, anthropic)``), or ``None`` when the head is not the start of a JSON
    object with a ``"messages"`` key. Never raises."""
    text = head_text(head)
    if not is_object_head(text):
        return None
    return len(OPENAI_SIGNS.findall(text)), len(ANTHROPIC_SIGNS.findall(text))


def body_problem(body: Any) -> str | None:
    """Why a parsed value cannot be a request body of either API (not an object, no
    ``messages`` list, or a Letta agent key), or ``None``: the first checks of both request
    importers' ``shape_problem``. Never raises."""
    if not isinstance(body, Mapping):
        return "not a JSON object"
    if not isinstance(body.get("messages"), list):
        return "no 'messages' list"
    key = agent_key(body)
    if key is not None:
        return f"it has {key!r}, a Letta agent file key"
    return None
