"""The task canvas: the Gateway's Mermaid task map as one ``<current_task_context>`` block.

Everything about the block lives here: formatting it from a query-mmd answer, sealing it when
it goes into the context, finding and stripping whole blocks in messages (content and the
host's ``api_content``, the rest kept byte-identical), its digest, putting the current one into
a request once, and the guard that keeps at most one per request. A block is ours only when its
seal verifies (``context/provenance.py``): tags a user types, or a canvas that tries to close
the block early, are text like any other. Stateless: which canvas is current, and which one a
session was last shown, is session state.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..common.text import clean_text
from . import mermaid
from .blocks import Kind, content_blocks
from .messages import newest_real_user, text_of, with_content
from .provenance import Seal
from .tokens import estimate_text

Message = Dict[str, Any]

TAG = "current_task_context"
OPEN = "<" + TAG
CLOSE = "</" + TAG + ">"
PREAMBLE = ("Task canvas kept by the TencentDB memory Gateway: your recorded progress on the "
            "current task. Nodes marked \"doing\" are the current focus, \"done\" are finished. "
            "Use it to keep direction and avoid repeating finished work.")
# the first line of the block the Gateway itself injects (gateway contract §3, step 7)
GATEWAY_PREAMBLE = "【当前活跃任务的mermaid流程图】这是你最近正在执行的任务的阶段性记录。"
# the Gateway's own block: preamble, goal, file, the fenced file content, a closing line
_GATEWAY_FRAME_RE = re.compile(re.escape(GATEWAY_PREAMBLE) + r"\n(?:\*\*任务目标[:：]\*\*[ \t]*([^\n]*)\n)?"
                               r"(?:\*\*任务文件[:：]\*\*[ \t]*([^\n]*)\n)?```mermaid\n(.*?)\n```"
                               r"(?:\n[^\n`]*)?", re.S)
_NO_TAG = r"(?:(?!</?current_task_context).)*"          # a body never holds our tags
# A sealed block ends with a seal line over its exact body (HMAC, ``context/provenance.py``).
_SEALED_RE = re.compile(r"<current_task_context>\n(%s)\n\[tdo-seal canvas ([0-9a-f]{20})\]\n"
                        r"</current_task_context>" % _NO_TAG, re.S)
_TAG_TEXT_RE = re.compile(r"<(\s*/?\s*current_task_context)", re.I)
_SEAL_TEXT_RE = re.compile(r"\[(\s*tdo-seal)", re.I)
# The real Gateway's canvas is ~1.7K tokens; it goes into every request, so one grown past
# this (or a hostile one: a 1 MB canvas took a 64K window whole) is cut, keeping its head.
MAX_CANVAS_TOKENS = 6_000
# Hermes replaces a hook's context over 10,000 characters (hooks.output_spill)
# by a 1,000-character preview: the block with its preamble and seal stays under that.
MAX_CANVAS_CHARS = 8_500
GOAL_CHARS = 300            # the goal line, from the canvas' metadata, is bounded apart
CUT_NOTE = "%%%% [... %d more characters of the canvas not shown: it is too long]"


def escape(text: str) -> str:
    """Text others wrote, safe inside our block: no tag and no seal line of ours, so it can
    neither close the block early, nor open a fake one, nor look sealed; and text UTF-8 can
    carry (a lone surrogate in a Gateway's canvas would fail every request). Idempotent."""
    return _SEAL_TEXT_RE.sub(r"&#91;\1", _TAG_TEXT_RE.sub(r"&lt;\1", clean_text(text)))


def bounded(text: str) -> str:
    """``text`` within ``MAX_CANVAS_TOKENS`` and ``MAX_CANVAS_CHARS``, cut at a line end, with
    a note of the rest."""
    tokens = estimate_text(text)
    if tokens <= MAX_CANVAS_TOKENS and len(text) <= MAX_CANVAS_CHARS:
        return text
    keep = min(int(len(text) * MAX_CANVAS_TOKENS / max(1, tokens) * 0.95),
               MAX_CANVAS_CHARS - 80)       # (the note)
    line_end = text.rfind("\n", 0, keep)
    keep = line_end if line_end > keep // 2 else keep
    return text[:keep] + "\n" + CUT_NOTE % (len(text) - keep)


def format_block(filename: str, content: str, goal: str = "") -> str:
    """The (unsealed) block for one canvas file as the model reads it (``mermaid.read``): its
    goal (from the file, else ``goal``) and progress first, the file named only when it has no
    goal; what the Gateway wrote is escaped. Sealed when it goes into the context (``sealed``)."""
    task = mermaid.read(content, MAX_CANVAS_CHARS - len(PREAMBLE) - GOAL_CHARS - 300)
    goal = task.goal or mermaid.flat(goal)
    lines = [PREAMBLE]
    if goal:
        progress = task.progress[:20] + ("%" if task.progress.isdigit() else "")
        lines.append("Goal: " + goal[:GOAL_CHARS]
                     + (" (progress %s)" % progress if task.progress else ""))
    elif filename.strip():
        lines.append("File: " + " ".join(filename.split())[:200])
    lines += ["```mermaid", bounded(escape(task.body)), "```"]
    return _wrap(OPEN + ">", "\n".join(lines))


def gateway_block(msg: Message) -> str:
    """The canvas the Gateway injected as a message of its own (``_mmdContextMessage``): in its
    own framing (gateway contract §4, step 7), read as ours is (``format_block``); else whole,
    everything it holds inside the block, even after a closing tag in the canvas."""
    text = text_of(msg).strip("\n")
    body = _inner(text)
    framed = _GATEWAY_FRAME_RE.fullmatch(body.strip())
    if framed:
        goal, filename, content = framed.groups()
        return format_block(filename or "", content, goal or "")
    return _wrap(OPEN + ">", bounded(escape(body))) if body.strip() else ""


def sealed(block: str, seal: Optional[Seal]) -> str:
    """``block`` as it goes into the context: its body escaped and sealed (without a seal,
    unsealed: then it is never recognised as ours)."""
    if not block:
        return ""
    m = _SEALED_RE.fullmatch(block)
    body = escape(m.group(1) if m else _inner(block))
    if seal is None:
        return _wrap(OPEN + ">", body)
    return _wrap(OPEN + ">", "%s\n[tdo-seal canvas %s]" % (body, seal.tag("canvas", body)))


def _inner(block: str) -> str:
    if block.startswith(OPEN + ">") and block.endswith(CLOSE):
        return block[len(OPEN) + 1:-len(CLOSE)].strip("\n")
    return block


def _wrap(opening: str, body: str) -> str:
    return "%s\n%s\n%s" % (opening, body, CLOSE)


def digest(text: str) -> str:
    return hashlib.md5(text.encode("utf-8", "surrogatepass")).hexdigest()


def _spans(text: str, seal: Optional[Seal]) -> List[Tuple[int, int]]:
    """Where our whole blocks are: sealed ones whose seal verifies. The unsealed shape of
    0.2 is public (the model reads its preamble in every canvas), so a user could type it:
    it is text like any other."""
    if seal is None or not isinstance(text, str) or OPEN not in text:
        return []
    return [m.span() for m in _SEALED_RE.finditer(text)
            if seal.check("canvas", m.group(1), m.group(2))]


def strip(text: str, seal: Optional[Seal] = None) -> Tuple[str, int]:
    """Remove every block of ours with the blank line that joined it; the rest of the text is
    kept byte for byte. Returns (text, blocks removed)."""
    spans = _spans(text, seal)
    if not spans:
        return text, 0
    out, at = [], 0
    for s, e in spans:
        if text[max(at, s - 2):s] == "\n\n":
            s -= 2
        elif text[e:e + 2] == "\n\n":
            e += 2
        out.append(text[at:s])
        at = e
    out.append(text[at:])
    return "".join(out), len(spans)


def blocks(text: str, seal: Optional[Seal] = None) -> List[str]:
    return [text[s:e] for s, e in _spans(text, seal)]


def holds_block(msg: Any, seal: Optional[Seal] = None) -> bool:
    if not isinstance(msg, dict) or msg.get("role") != "user":
        return False
    return bool(_spans(text_of(msg), seal) or _spans(msg.get("api_content"), seal))


def strip_from(msg: Message, seal: Optional[Seal] = None) -> Tuple[Optional[Message], int]:
    """A message without our blocks (None if nothing else was left), and the count. Its
    ``api_content`` (the host's exact bytes, which hold other plugins' context such as the
    memory provider's ``<memory-context>``) loses our blocks too and keeps everything else.

    Canvases only ever live in user messages (our injection, the Gateway's insertion)."""
    if msg.get("role") != "user":
        return msg, 0
    removed = 0
    content = msg.get("content")
    new_content: Any = content
    if isinstance(content, str):
        new_content, removed = strip(content, seal)
    elif isinstance(content, list):
        parts = []
        for b in content_blocks(content):       # canvases are text: other blocks stay as sent
            if b.kind in (Kind.TEXT, Kind.OTHER) and isinstance(b.raw, dict) and b.text:
                t, n = strip(b.text, seal)
                removed += n
                if n and not t.strip():
                    continue
                parts.append(dict(b.raw, text=t) if n else b.raw)
            else:
                parts.append(b.raw)
        new_content = parts
    api = msg.get("api_content")
    api_new, api_removed = strip(api, seal) if isinstance(api, str) else (api, 0)
    if not removed and not api_removed:
        return msg, 0
    if removed and ((isinstance(new_content, str) and not new_content.strip())
                    or new_content == []):
        return None, removed + api_removed
    return _rebuilt(msg, new_content, api_new), removed + api_removed


def _rebuilt(msg: Message, content: Any, api: Any) -> Message:
    """``msg`` with new content, keeping the host's ``api_content`` sidecar (edited alike)."""
    out = with_content(msg, content)
    if isinstance(api, str):
        out["api_content"] = api
    return out


def strip_all(messages: Sequence[Any], seal: Optional[Seal] = None) -> Tuple[List[Any], int]:
    """Every message without our blocks (messages left empty are dropped), and the count."""
    out: List[Any] = []
    removed = 0
    for m in messages:
        fixed, n = strip_from(m, seal) if isinstance(m, dict) else (m, 0)
        removed += n
        if fixed is not None:
            out.append(fixed)
    return out, removed


def append_text(content: Any, text: str) -> Any:
    if isinstance(content, list):
        return list(content) + [{"type": "text", "text": text}]
    base = content if isinstance(content, str) else ""
    return (base + "\n\n" + text) if base else text


def _appended(msg: Message, block: str) -> Message:
    """``msg`` with ``block`` after its content and after its ``api_content`` (what is sent)."""
    api = msg.get("api_content")
    return _rebuilt(msg, append_text(msg.get("content"), block),
                    append_text(api, block) if isinstance(api, str) and api else api)


def inject(messages: List[Message], block: str, seal: Optional[Seal] = None) -> List[Message]:
    """``messages`` with ``block`` (sealed) appended to the newest real user message (a new
    list; the same list when there is no such message)."""
    return inject_at(messages, newest_real_user(messages, seal=seal), block, seal)


def inject_at(messages: List[Message], idx: int, block: str,
              seal: Optional[Seal] = None) -> List[Message]:
    """``messages`` with ``block`` (sealed) appended to message ``idx`` (a new list)."""
    if idx < 0 or not block:
        return messages
    out = list(messages)
    out[idx] = _appended(messages[idx], sealed(block, seal))
    return out


def keep_newest(messages: List[Message],
                seal: Optional[Seal] = None) -> Tuple[Optional[List[Message]], int]:
    """The request guard: at most one block per request, the newest, where it was.

    Returns (new list, blocks removed), or (None, 0) when the request is already fine."""
    holders = [i for i, m in enumerate(messages) if holds_block(m, seal)]
    if not holders:
        return None, 0
    newest = holders[-1]
    found = blocks(text_of(messages[newest]), seal) or \
        blocks(messages[newest].get("api_content") or "", seal)
    if len(holders) == 1 and len(found) <= 1:
        return None, 0
    removed = 0
    out = list(messages)
    for i in holders:
        fixed, n = strip_from(messages[i], seal)
        removed += n
        out[i] = fixed if fixed is not None else {"role": "user", "content": "(context)"}
    out[newest] = _appended(out[newest], found[-1])
    return out, max(0, removed - 1)
