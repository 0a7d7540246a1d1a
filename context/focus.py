"""The focus of ``/compress <focus>``: a few words; what matches them is kept first.

Hermes passes the text after ``/compress`` as ``focus_topic``. It is the user's, but free
text of any size: it is cleaned (printable, bounded) and reduced to at most ``MAX_TERMS``
words, common words dropped. A message matches when one of them occurs in its text as a
whole word, case aside (a word of another script, which has no spaces, anywhere). The local
compaction keeps matching groups before older ones; after a Gateway compaction the matching
items it archived are listed with the ids that read them back. Pure.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Pattern, Sequence, Tuple

from .messages import text_of
from .departures import find
from .digest import key_arg, message_key, one_line
from .provenance import Seal
from ..common.humanize import printable

Message = Dict[str, Any]
MAX_TERMS = 5
RAW_CHARS = 400             # of the focus text that is read at all
MAX_LEN = 40                # longer "words" are noise (hashes, base64), never a topic
SCAN_CHARS = 200_000        # of one message's text, when matching
SHARE = 0.6                 # of the room a local compaction may give to matching groups
MAX_LINES = 12              # archived matches listed after a Gateway compaction
_STOP = frozenset("the and for with from this that these those what about into only "
                  "keep focus please also more less".split())


def terms(focus: Any) -> Tuple[str, ...]:
    """The focus as at most ``MAX_TERMS`` distinct lower-case words; () for no focus."""
    if not isinstance(focus, str):
        return ()
    out: List[str] = []
    for word in re.findall(r"\w+", printable(focus[:RAW_CHARS]).lower()):
        short = len(word) < (3 if word.isascii() else 2)
        if short or len(word) > MAX_LEN or word in _STOP or word in out or word.isdigit():
            continue
        out.append(word)
        if len(out) == MAX_TERMS:
            break
    return tuple(out)


def pattern(words: Sequence[str]) -> Optional[Pattern[str]]:
    """One case-insensitive pattern for ``words`` (None for none)."""
    if not words:
        return None
    alts = [(r"(?<!\w)%s(?!\w)" if w.isascii() else "%s") % re.escape(w) for w in words]
    return re.compile("|".join(alts), re.I)


def matches(messages: Sequence[Any], pat: Optional[Pattern[str]]) -> bool:
    """Some message of ``messages`` (text, call arguments, results) matches ``pat``."""
    return pat is not None and any(pat.search(text_of(m)[:SCAN_CHARS]) for m in messages
                                   if isinstance(m, dict))


def archived(before: Sequence[Message], after: Sequence[Message], words: Sequence[str],
             seal: Optional[Seal] = None) -> Tuple[str, ...]:
    """One line per item of ``before`` that matches ``words`` and is not in ``after`` in
    full: ``[tool_call_id] tool argument`` or ``(key) role: first line``."""
    pat = pattern(words)
    if pat is None:
        return ()
    lines: List[str] = []
    found = [d for d in find(list(before), list(after), seal=seal).items
             if pat.search(d.content[:SCAN_CHARS]) or pat.search(str(d.args)[:SCAN_CHARS])]
    for d in found[:MAX_LINES]:
        if d.kind == "tool_result":
            lines.append(("[%s] %s %s" % (one_line(d.tool_call_id, 80), one_line(d.tool_name, 60),
                                          key_arg(d.args))).rstrip())
        else:
            lines.append("(%s) %s: %s" % (message_key(d.role, d.content), d.role,
                                          one_line(d.content, 100)))
    if len(found) > MAX_LINES:
        # an item matches any one word, a search needs all of its words: one search a word
        lines.append("+%d more: %s" % (len(found) - MAX_LINES, ", ".join(
            "tdai_offload_search(query=\"%s\")" % w for w in words)))
    return tuple(lines)
