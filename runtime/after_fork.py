"""A host that forks after loading the plugin: the child says plainly that it archives nothing.

``fork()`` copies only the calling thread. A lock another thread held at that moment stays
held in the child for good, and SQLite keeps process-wide locks of its own: measured here, a
child that opened the store again hung in ``sqlite3.connect`` (1 run in 8 under load) because
the parent's sender was inside SQLite when the host forked. The same holds for Hermes' own
threads, so no reopening can be made safe. The child therefore never touches SQLite or the
Gateway again: its hooks and compactions go on locally, nothing is promised that the archive
does not hold (a trimmed result stays whole), and status and the log say why.
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any, Callable, List

from ..archive.recall import RecallTools
from ..archive.writer import StoreWriter
from ..session.state import new_stats_lock
from ..common.peer_text import plugin_logger

log = plugin_logger("tencentdb_offload")
_RUNTIMES: "weakref.WeakSet[Any]" = weakref.WeakSet()
_RESETS: "List[weakref.WeakMethod]" = []      # bound methods that re-create their locks
FORKED = ("this process was forked from one that had already loaded the plugin: SQLite and "
          "the Gateway are not used here (a lock held at the fork would hang the process), so "
          "nothing is archived or sent from it; compaction goes on locally")


def watch(runtime: Any) -> None:
    """Disarm ``runtime`` in any child this process forks from now on."""
    _RUNTIMES.add(runtime)


def reset_in_child(method: Callable[[], None]) -> None:
    """Call ``method`` (bound; it only makes new locks) in any child forked from now on: a
    lock a parent thread held at the fork would hang the child's next hook for good."""
    _RESETS[:] = [m for m in _RESETS if m() is not None]
    _RESETS.append(weakref.WeakMethod(method))


def disarm(rt: Any) -> None:
    """``rt`` in a forked child: no store, no Gateway, no inherited thread; said plainly.

    This runs between fork and exec in every child the host starts with a ``preexec_fn``
    (Hermes' shell and file tools do): it takes no lock the parent's threads may have held at
    the fork (a hook on another thread holding the counters' lock hung the child, and the
    tool call with it), starts no thread and writes no log line. The child's writer starts
    its thread, and logs why nothing is archived, only when the child really uses it."""
    if rt.closed:
        return
    rt.writer.abandon()                 # its thread and queue are the parent's
    # no opener: rows are counted lost, never written; said when the child first writes
    rt.writer = StoreWriter(None, start=False,
                            on_start=lambda: log.error("tencentdb-offload: %s", FORKED))
    rt.store = None
    rt.registry.forget_store()
    rt.client, rt.worker, rt._wiring = None, None, threading.Lock()
    rt.ahead = type(rt.ahead)(rt.gateway_attempt, rt.settings.max_sessions)
    rt.tools = RecallTools(None, rt.flush_writes)
    rt.store_error = FORKED
    rt.warnings.append(FORKED)
    rt.counters = rt.counters.forked_copy()
    rt.counters.add("forked")


def _in_child() -> None:
    new_stats_lock()
    for ref in list(_RESETS):
        method = ref()
        try:
            if method is not None:
                method()
        except Exception:           # never break the host's child (and no log here)
            pass
    for rt in list(_RUNTIMES):
        try:
            disarm(rt)
        except Exception:           # never break the host's child (and no log here)
            rt.closed = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)
