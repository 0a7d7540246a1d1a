"""Which messages a /compact reply may contain: the shapes a provider request accepts.

A reply is checked before any repair, with the one message judge (``context.validate``) and
the reply's own, narrower role set: roles other than user / assistant / tool / system
(``developer``, ``function``, made-up ones) are refused, as are content that is neither text,
null nor a list of typed blocks and tool calls without an id or a named function: repairing
a message we cannot read would guess, and local compaction is always available.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, List

from ..context.validate import message_problem

ROLES = ("system", "user", "assistant", "tool")     # a Gateway never writes developer turns


def shape_problems(reply: List[Any]) -> str:
    """"" when every message is well formed, else a short count of what is wrong
    (kinds only: the reply's text is never quoted)."""
    found: Counter = Counter()
    for m in reply:
        problem = message_problem(m, ROLES)
        if problem:
            found[problem] += 1
    return ", ".join("%d %s" % (n, what) for what, n in sorted(found.items()))
