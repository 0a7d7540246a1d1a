"""Errors of the plugin's own code, said once each: the first of a kind goes to ``status`` and
the log (a WARNING with its traceback); the same error again is only logged at DEBUG.

A guard on a hot path (a pool thread, a check the host makes every turn) that logged nothing
hid a bug for good; one that logged every call would write the same traceback per turn.
"""

from __future__ import annotations

import sys
import traceback
from typing import Callable

from .peer_text import plugin_logger
from .recent_set import RecentSet

log = plugin_logger("tencentdb_offload")


class OncePerError:
    def __init__(self, note: Callable[[str, str], None], kinds: int = 64) -> None:
        self._note = note           # records for status and logs (with the traceback)
        self._seen = RecentSet(kinds)

    def __call__(self, what: str, conversation: str = "") -> None:
        """Call in an ``except`` block: ``what`` failed with the exception being handled
        (``conversation``: whose work it was, kept apart from the text)."""
        exc = sys.exc_info()[1]
        where = traceback.extract_tb(exc.__traceback__)[-1][:2] if exc and exc.__traceback__ else ()
        kind = (what, type(exc).__name__, str(exc)[:200], where)
        if kind in self._seen:
            log.debug("tencentdb-offload: %s again (%s)", what, exc)
            return
        self._seen.add(kind)
        self._note("%s (%s: %s)" % (what, type(exc).__name__, exc), conversation)
