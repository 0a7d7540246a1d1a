"""The errors a guard caught, for status: each with the conversation it happened in, kept apart
from its text, so what a reader is shown is decided by ``archive/visibility.py``.

An error's text never names a conversation; the conversation is a field. A reader who may
see that conversation reads the error with its name; in the messaging gateway, whoever runs the
slash command reads another conversation's errors as a count only (their text may quote a
peer's words, and those may carry the chat's id).
"""

from __future__ import annotations

import collections
import threading
import time
from dataclasses import dataclass
from typing import Iterator, List

from ..archive.visibility import OPERATOR, Scope


@dataclass(frozen=True)
class NotedError:
    stamp: str
    text: str
    conversation: str = ""


class RecentErrors:
    """The newest ``most`` errors of this process."""

    def __init__(self, most: int = 20) -> None:
        self._lock = threading.Lock()
        self._items: "collections.deque[NotedError]" = collections.deque(maxlen=most)

    def add(self, text: str, conversation: str = "") -> None:
        with self._lock:
            self._items.append(NotedError(time.strftime("%H:%M:%S"), text, conversation))

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[str]:        # the operator's lines (tests, the demo)
        return iter(self.lines(OPERATOR))

    def __getitem__(self, index: int) -> str:
        return self.lines(OPERATOR)[index]

    def lines(self, scope: Scope) -> List[str]:
        """What ``scope``'s reader may read, oldest first: errors it may see (with the
        conversation's name when it is not private), then a count of the others."""
        with self._lock:
            items = list(self._items)
        shown = [e for e in items if scope.sees(e.conversation)]
        lines = ["%s %s%s" % (e.stamp, e.text, "" if scope.private or not e.conversation
                                                else " (conversation %s)" % e.conversation)
                 for e in shown]
        hidden = len(items) - len(shown)
        if hidden:
            lines.append("%d error(s) in other conversations, not shown here (the host's "
                         "`python3 <plugin dir> status` shows them)" % hidden)
        return lines
