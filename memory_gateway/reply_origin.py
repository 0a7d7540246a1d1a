"""Whether a /compact reply comes from our request: the only things the Gateway may do to it.

Its algorithm (replay of earlier decisions, mild, aggressive, emergency, canvas injection)
only removes messages, replaces or truncates tool results, removes tool-call blocks whose
results it removed, and inserts its canvases (user messages that are only
``<current_task_context>`` / ``<history_task_context>`` blocks). So, system messages aside
(they are dropped; the host's are kept as given):

* every other message of the reply is a message we sent, in the order we sent them, each at
  most once; a tool result may carry new content (a summary, a truncation), nothing else may
  change;
* every tool call and result carries an id we sent, once, in our order, and a call is the
  call we sent (same name, same arguments);
* the current turn (the newest real user message we sent) is in the reply byte-identical.

Anything else — an invented call (``call_fabricated`` running ``rm -rf /data``), a repeated
call id, turns in another order, an assistant reply added after the turn, a user message
rewritten after its first 200 characters — refuses the whole reply: a peer that made up
content in one place is not trusted for the rest of that reply, and local compaction is
always there. Both lists must already be well-shaped (``reply_shape``).
"""

from __future__ import annotations

import bisect
import json
import re
from collections import Counter, defaultdict
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..context.blocks import Kind, content_blocks, read_block
from ..context.messages import calls_of, fresh, is_real_user, results_of

Message = Dict[str, Any]
_HISTORY = re.compile(r"\s*<history_task_context>.*?</history_task_context>\s*", re.S)
CURRENT_TURN = "current turn not returned unchanged"


def unfaithful(reply: Sequence[Message], sent: Sequence[Message]) -> str:
    """"" when ``reply`` comes from ``sent`` (see the module docstring), else the kinds of
    what does not, with counts (the reply's text is never quoted)."""
    index = _Sent(sent)
    rest = [_kept(m) for m in reply if m.get("role") != "system"]
    found: Counter = Counter()
    current = current_turn(sent)
    turn = sent[current] if current >= 0 else None
    at = next((p for p in range(len(rest) - 1, -1, -1)
               if turn is not None and rest[p].get("role") == "user" and _same(rest[p], turn)), -1)
    if turn is None or at < 0:
        if turn is not None:
            found[CURRENT_TURN] += 1
        index.align(rest, -1, len(sent), found)
    else:       # split there: an earlier identical turn ("continue") may be gone
        index.align(rest[:at], -1, current, found)
        index.align(rest[at + 1:], current, len(sent), found)
    return ", ".join("%d %s" % (n, what) for what, n in sorted(found.items()))


def _kept(m: Message) -> Message:
    """The reply message without host bookkeeping keys, but with the Gateway's canvas flag."""
    out = fresh(m)
    if m.get("_mmdContextMessage"):
        out["_mmdContextMessage"] = m["_mmdContextMessage"]
    return out


def current_turn(messages: Sequence[Message]) -> int:
    """Index of the newest real user message that is not a canvas (-1: none)."""
    return next((i for i in range(len(messages) - 1, -1, -1)
                 if is_real_user(messages[i]) and not canvas_only(messages[i])), -1)


def canvas_only(m: Message) -> bool:
    """The Gateway's own canvas message (``_mmdContextMessage``: taken whole as the canvas,
    its text escaped into our block, never kept as a message), or a user message that is
    nothing but its ``<history_task_context>`` blocks (inserted beside it)."""
    if m.get("role") != "user":
        return False
    if m.get("_mmdContextMessage"):
        return True
    content = m.get("content")
    if isinstance(content, list):
        blocks = list(content_blocks(content))
        if not all(b.kind is Kind.TEXT and isinstance(b.raw, dict) for b in blocks):
            return False
        content = "\n".join(b.text for b in blocks)
    if not isinstance(content, str) or not content.strip():
        return False
    return not _HISTORY.sub("", content).strip()


class _Sent:
    """The request, indexed: by call/result id, and by exact content for the rest."""

    def __init__(self, sent: Sequence[Message]) -> None:
        self.sent = sent
        self.by_id: Dict[Tuple[str, str], List[int]] = defaultdict(list)
        self.exact: Dict[str, List[int]] = defaultdict(list)
        self.bare: Dict[str, List[int]] = defaultdict(list)    # its calls/results removed
        for i, m in enumerate(sent):
            ids = _ids(m)
            for key in ids:
                self.by_id[key].append(i)
            if not ids:
                self.exact[_canon(m)].append(i)
            elif m.get("role") != "tool":
                self.bare[_canon(_bare(m))].append(i)

    def align(self, reply: Sequence[Message], lo: int, hi: int, found: Counter) -> None:
        """Match ``reply`` in order against ``sent[lo+1:hi]``; count what matches nothing."""
        for m in reply:
            i = self._find(m, lo, hi)
            if i is not None:
                lo = i
            elif not canvas_only(m):
                found[self._why(m)] += 1

    def _find(self, m: Message, lo: int, hi: int) -> Optional[int]:
        ids = _ids(m)
        if ids:
            candidates = self.by_id.get(ids[0], [])
            for i in candidates[bisect.bisect_right(candidates, lo):]:
                if i >= hi:
                    break
                if _derived(m, self.sent[i]):
                    return i
            return None
        key = _canon(m)
        for table in (self.exact, self.bare):
            candidates = table.get(key, [])
            k = bisect.bisect_right(candidates, lo)
            if k < len(candidates) and candidates[k] < hi:
                return candidates[k]
        return None

    def _why(self, m: Message) -> str:
        ids = _ids(m)
        if any(key not in self.by_id for key in ids):
            return "invented tool calls"
        if ids:
            return "repeated, reordered or altered tool calls"
        key = _canon(m)
        if key in self.exact or key in self.bare:
            return "repeated or reordered messages"
        return "messages not in the request"


def _ids(m: Message) -> List[Tuple[str, str]]:
    return ([("call", c) for c in calls_of(m)] +
            [("result", r) for r in results_of(m)])


def _bare(m: Message) -> Message:
    """``m`` without its tool calls and tool-result blocks (what is left when the Gateway
    removed all of them)."""
    out = {k: v for k, v in m.items() if k != "tool_calls"}
    if isinstance(m.get("content"), list):
        out["content"] = [b for b in m["content"] if not _droppable_block(b)]
    return out


def _derived(r: Message, w: Message) -> bool:
    """``r`` is ``w`` with calls/result blocks removed or result content replaced."""
    if r.get("role") != w.get("role"):
        return False
    if not _same(_without(r, "content", "tool_calls"), _without(w, "content", "tool_calls")):
        return False
    if not _sublist(r.get("tool_calls") or [], w.get("tool_calls") or [], _same,
                    lambda call: True):
        return False
    if r.get("role") == "tool":     # a result's content may be a summary or a truncation
        return _replaced_with_text(r.get("content"), w.get("content"))
    rc, wc = r.get("content"), w.get("content")
    if isinstance(rc, list) and isinstance(wc, list):
        return _sublist(rc, wc, _block_from, _droppable_block)
    return _same(rc, wc)


def _block_from(b: Any, wb: Any) -> bool:
    """Reply block ``b`` is sent block ``wb``, a result's content perhaps replaced."""
    if read_block(wb).kind is Kind.TOOL_RESULT:
        return (read_block(b).kind is Kind.TOOL_RESULT
                and _same(_without(b, "content"), _without(wb, "content"))
                and _replaced_with_text(b.get("content"), wb.get("content")))
    return _same(b, wb)


def _replaced_with_text(new: Any, old: Any) -> bool:
    """A result's content kept, or replaced by text: a summary or a truncation is text, never
    an image, a block of unknown kind, or a lone surrogate (which no JSON encoder sends)."""
    if _same(new, old):
        return True
    if isinstance(new, list):
        return all(isinstance(b, dict) and read_block(b).kind is Kind.TEXT
                   and _sendable(b.get("text")) for b in new)
    return _sendable(new)


def _sendable(text: Any) -> bool:
    if not isinstance(text, str):
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _droppable_block(b: Any) -> bool:
    return read_block(b).kind in (Kind.TOOL_USE, Kind.TOOL_RESULT)


def _sublist(items: Sequence[Any], source: Sequence[Any], same: Callable[[Any, Any], bool],
             droppable: Callable[[Any], bool]) -> bool:
    """``items`` is ``source`` with only ``droppable`` entries left out, in order."""
    j = 0
    for x in items:
        while j < len(source) and not same(x, source[j]):
            if not droppable(source[j]):
                return False
            j += 1
        if j == len(source):
            return False
        j += 1
    return all(droppable(y) for y in source[j:])


def _without(m: Message, *keys: str) -> Message:
    return {k: v for k, v in m.items() if k not in keys}


def _same(a: Any, b: Any) -> bool:
    return a == b or _canon(a) == _canon(b)     # (JSON turned tuples into lists)


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      default=str)
