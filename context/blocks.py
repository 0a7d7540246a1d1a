"""The message vocabulary: what a message carries, as typed blocks, read in one place.

Providers spell the same things two ways. A tool call is an entry of OpenAI ``tool_calls`` or
an Anthropic ``tool_use`` content block; a tool result is a ``tool`` role message or a
``tool_result`` block in a user message; text is a string content, a string in a content list
or a ``text`` block. ``blocks_of`` reads any of these (and odd ones: None content, non-object
entries, nested result content) into ``Block`` values, so every other module asks a block its
kind instead of looking at ``"type"`` keys itself. Pure: nothing here changes a message.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass
from typing import Any, Iterator, List

IMAGE_TYPES = ("image", "image_url", "input_image")


class Kind(enum.Enum):
    TEXT = "text"
    TOOL_USE = "tool_use"             # a tool call (either spelling)
    TOOL_RESULT = "tool_result"       # a tool result (either spelling)
    OTHER = "other"                   # images, thinking, documents, anything unreadable


@dataclass          # a value, never changed; not frozen: a frozen __init__ costs 2.4x, and the
class Block:        # hooks read every message of a history they are handed
    kind: Kind
    text: str = ""          # TEXT: the text; TOOL_RESULT: the result's text; OTHER: a "text" field
    id: str = ""            # TOOL_USE: the call id; TOOL_RESULT: the id it answers ("" if none)
    name: str = ""          # TOOL_USE: the tool ("" if none)
    args: Any = None        # TOOL_USE: the arguments as sent (JSON text or an object)
    inner: Any = None       # TOOL_RESULT: its content as sent (text, a list of blocks, None)
    thinking: str = ""      # a reasoning block's text: counted for size, never shown as text
    type: str = ""          # the raw ``type`` string of a content block ("" if it has none)
    in_calls: bool = False  # an entry of OpenAI ``tool_calls`` (not a content block)
    raw: Any = None         # what was read: the block, the tool_calls entry, the string, the message

    @property
    def is_image(self) -> bool:
        return self.type in IMAGE_TYPES


def _ident(value: Any) -> str:
    return "" if value is None else str(value)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def read_block(item: Any) -> Block:
    """One element of a content list."""
    if isinstance(item, str):
        return Block(Kind.TEXT, text=item, raw=item)
    if not isinstance(item, dict):
        return Block(Kind.OTHER, raw=item)
    kind = item.get("type")
    tag = kind if isinstance(kind, str) else ""
    if kind == "tool_use":
        return Block(Kind.TOOL_USE, id=_ident(item.get("id")), name=_ident(item.get("name")),
                     args=item.get("input"), type=tag, raw=item)
    if kind == "tool_result":
        return Block(Kind.TOOL_RESULT, text=content_text(item.get("content")),
                     id=_ident(item.get("tool_use_id")), inner=item.get("content"), type=tag,
                     raw=item)
    return Block(Kind.TEXT if kind == "text" else Kind.OTHER, text=_str(item.get("text")),
                 name=_str(item.get("name")), thinking=_str(item.get("thinking")), type=tag,
                 args=item.get("input"), inner=item.get("content"), raw=item)


def content_blocks(content: Any) -> Iterator[Block]:
    """The blocks of a ``content`` value: text, a list of blocks, or nothing (None)."""
    if content is None:
        return
    if isinstance(content, list):
        for item in content:
            yield read_block(item)
    elif isinstance(content, str):
        yield Block(Kind.TEXT, text=content, raw=content)
    else:
        yield Block(Kind.OTHER, raw=content)


def call_blocks(tool_calls: Any) -> Iterator[Block]:
    """The entries of an OpenAI ``tool_calls`` list (a non-object entry is OTHER)."""
    for call in tool_calls if isinstance(tool_calls, list) else ():
        if not isinstance(call, dict):
            yield Block(Kind.OTHER, in_calls=True, raw=call)
            continue
        fn = call.get("function")
        fn = fn if isinstance(fn, dict) else {}
        yield Block(Kind.TOOL_USE, id=_ident(call.get("id") or None), name=_ident(fn.get("name")),
                    args=fn.get("arguments", ""), in_calls=True, raw=call)


def blocks_of(msg: Any) -> Iterator[Block]:
    """Every block a message carries: its content, then its ``tool_calls``. A ``tool`` message
    is one TOOL_RESULT (its content as the result). Not a message: nothing."""
    if not isinstance(msg, dict):
        return
    content = msg.get("content")
    if msg.get("role") == "tool":
        yield Block(Kind.TOOL_RESULT, text=content if isinstance(content, str) else
                    content_text(content), id=_ident(msg.get("tool_call_id") or None),
                    inner=content, raw=msg)
    else:
        yield from content_blocks(content)
    yield from call_blocks(msg.get("tool_calls"))


# --- the facts everyone asks -----------------------------------------------------------

def tool_uses(msg: Any) -> List[Block]:
    """The calls an assistant message issues with an id, OpenAI ``tool_calls`` first (only a
    content *list* can hold ``tool_use`` blocks: text content is not read)."""
    if not isinstance(msg, dict) or msg.get("role") != "assistant":
        return []
    uses = [b for b in call_blocks(msg.get("tool_calls")) if b.kind is Kind.TOOL_USE and b.id]
    content = msg.get("content")
    if isinstance(content, list):
        uses += [b for b in content_blocks(content) if b.kind is Kind.TOOL_USE and b.id]
    return uses


def use_ids(msg: Any) -> List[str]:
    """``[b.id for b in tool_uses(msg)]`` without building the blocks: every pass over a
    history asks it of each message, several times per compaction."""
    if not isinstance(msg, dict) or msg.get("role") != "assistant":
        return []
    calls = msg.get("tool_calls")
    ids = [_ident(c.get("id") or None) for c in calls if isinstance(c, dict)] \
        if isinstance(calls, list) else []
    content = msg.get("content")
    if isinstance(content, list):
        ids += [_ident(i.get("id")) for i in content
                if isinstance(i, dict) and i.get("type") == "tool_use"]
    return [i for i in ids if i]


def result_ids(msg: Any) -> List[str]:
    """``[b.id for b in tool_results(msg)]`` without building the blocks (see ``use_ids``)."""
    r = msg.get("role") if isinstance(msg, dict) else None
    if r == "tool":
        return [_ident(msg.get("tool_call_id") or None)]
    content = msg.get("content") if r == "user" else None
    if not isinstance(content, list):
        return []
    return [_ident(i.get("tool_use_id")) for i in content
            if isinstance(i, dict) and i.get("type") == "tool_result"]


def tool_results(msg: Any) -> List[Block]:
    """The results a message carries: a ``tool`` message, or a user message's result blocks."""
    r = msg.get("role") if isinstance(msg, dict) else None
    if r == "tool":
        return [next(blocks_of(msg))]
    if r == "user" and isinstance(msg.get("content"), list):
        return [b for b in content_blocks(msg["content"]) if b.kind is Kind.TOOL_RESULT]
    return []


def only_results(msg: Any) -> bool:
    """A message that carries tool results and nothing else."""
    r = msg.get("role") if isinstance(msg, dict) else None
    if r == "tool":
        return True
    content = msg.get("content") if r == "user" else None
    return (isinstance(content, list) and bool(content) and     # (read_block's TOOL_RESULT test)
            all(isinstance(i, dict) and i.get("type") == "tool_result" for i in content))


def as_text(value: Any) -> str:
    """Arguments (or any value) as text: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def call_text(b: Block) -> str:
    """How a call reads in text: ``name(arguments)``."""
    return "%s(%s)" % (b.name, as_text(b.args))


def text_parts(blocks: Iterator[Block]) -> List[str]:
    """The readable text of ``blocks``: text, calls as ``name(arguments)``, results' text."""
    parts: List[str] = []
    for b in blocks:
        if b.kind is Kind.TOOL_USE:
            if not b.in_calls or isinstance(b.raw.get("function"), dict):
                parts.append(call_text(b))
        elif b.text:
            parts.append(b.text)
    return parts


def content_text(content: Any) -> str:
    """All text a content value carries (results nested in it included), one part a line."""
    return "\n".join(p for p in text_parts(content_blocks(content)) if p)


def as_blocks(content: Any) -> List[Any]:
    """``content`` as a list of blocks (text becomes one text block), for joining two."""
    if isinstance(content, list):
        return list(content)
    if content:
        return [{"type": "text", "text": str(content)}]
    return []
