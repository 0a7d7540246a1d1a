"""What a compaction carries across besides the turns that left: the memory provider's text
and the focus-matched items the Gateway archived, cleaned, bounded and placed once.

Hermes passes what a memory provider's ``on_pre_compress`` returns to
``compress`` as ``memory_context``. It is a peer's text: control characters and bidi
overrides go, our own marks (the notice prefix, a seal line, the canvas and recall fences)
are defused so it never reads as ours, and it is capped. It rides in the one digest section
the compaction writes, or, when the compaction writes none, in one sealed note pair at the
end of the compacted list (past every change the compaction made, so the prompt cache loses
nothing more); it is never added per request, and not at all while the same text is still in
the context. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Sequence, Tuple

from .messages import calls_of, group_spans, is_tool_result, leading_systems, role, text_of
from ..common.humanize import printable
from .redact import strict

Message = Dict[str, Any]
MEMORY_CHARS = 2000         # of the provider's text (Hermes itself caps it at 6,000)
MEMORY_HEAD = ("Kept by the memory provider at this compaction (its text, not the user's "
               "words):")
FOCUS_HEAD = ("Archived items matching the focus \"%s\" (tdai_read_cos reads each in full, "
              "by the id in brackets or the key in parentheses):")
INDENT = "  "               # body lines are indented: never read as a turn or rule line
# our notice prefix, seal line, canvas and recall fences: their first character is defused
_OURS = re.compile(r"\[(?=\s*(?:tdo-seal|tencentdb-offload\s*\]))|"
                   r"<(?=\s*/?\s*(?:current_task_context|history_task_context|"
                   r"memory-context)\b)", re.I)


def clean_peer(text: Any, limit: int = MEMORY_CHARS) -> str:
    """A peer's text as it may stand in a digest: printable, no blank lines, none of our
    marks, secrets masked (``strict``), at most ``limit`` characters; "" when nothing is left."""
    if not isinstance(text, str) or not text.strip():
        return ""
    out = _OURS.sub(lambda m: "(" if m.group() == "[" else "\u2039",
                    printable(text[:4 * limit + 1000]).replace("\t", " "))
    out = "\n".join(ln.rstrip() for ln in strict(out).splitlines() if ln.strip())
    return out if len(out) <= limit else out[:max(1, limit - 1)].rstrip() + "\u2026"


@dataclass(frozen=True)
class Notes:
    """What this compaction adds to its digest section beyond the turns."""
    memory: str = ""                     # cleaned provider text (``clean_peer``)
    focus: str = ""                      # the focus terms, as shown
    focus_left: Tuple[str, ...] = ()     # one line per focus-matched item the Gateway archived

    def __bool__(self) -> bool:
        return bool(self.memory or self.focus_left)

    def without_memory(self) -> "Notes":
        return replace(self, memory="")

    def lines(self) -> List[str]:
        out: List[str] = []
        if self.memory:
            out += [MEMORY_HEAD] + [INDENT + ln for ln in self.memory.splitlines()]
        if self.focus_left:
            out += [FOCUS_HEAD % self.focus] + [INDENT + ln for ln in self.focus_left]
        return out


def memory_of(body: str) -> str:
    """The provider text an earlier digest body carries ("" if none)."""
    lines = body.splitlines()
    if MEMORY_HEAD not in lines:
        return ""
    out = []
    for ln in lines[lines.index(MEMORY_HEAD) + 1:]:
        if not ln.startswith(INDENT):
            break
        out.append(ln[len(INDENT):])
    return "\n".join(out)


def _flat(text: str) -> str:
    return " ".join(text.split())


def carried(text: str, messages: Sequence[Any]) -> bool:
    """``text`` already stands in one of ``messages`` (whitespace aside)."""
    want = _flat(text)
    return bool(want) and any(want in _flat(text_of(m)) for m in messages
                              if isinstance(m, dict))


def place(after: List[Message], pair: List[Message]) -> List[Message]:
    """``after`` with ``pair`` at its end, before the current turn's request when the list
    ends with it, never right after a plain assistant message (a host would merge the call
    into it), never first. The end is past any change a compaction made, so this costs the
    prompt cache nothing more, and it leaves the positions of the older messages as they
    were (the Gateway's levels scan the list by position)."""
    at = len(after)
    if at and role(after[-1]) == "user" and not is_tool_result(after[-1]):
        at -= 1
    while at > 0 and role(after[at - 1]) == "assistant" and not calls_of(after[at - 1]):
        at -= 1
    systems = leading_systems(after)
    if at <= systems:           # never first: a provider wants the conversation to open with
        at = next((e for s, e in group_spans(after) if s >= systems), len(after))  # a user
    return after[:at] + pair + after[at:]
