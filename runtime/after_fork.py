"""A host that forks after loading the plugin: the child starts its own threads and connections.

``fork()`` copies only the calling thread: the store writer, the ingest sender and the
compaction pool do not exist in the child, while their objects still look alive (hooks would
queue writes nobody commits, and status would call the writer healthy). Inherited SQLite
connections and kept-alive sockets belong to the parent and must not be used. So in the
child every live runtime forgets them and starts fresh ones; what the parent had queued is
the parent's to commit.
"""

from __future__ import annotations

import os
import weakref
from typing import Any

from ..common.peer_text import plugin_logger

log = plugin_logger("tencentdb_offload")
_RUNTIMES: "weakref.WeakSet[Any]" = weakref.WeakSet()


def watch(runtime: Any) -> None:
    """Reopen ``runtime`` in any child this process forks from now on."""
    _RUNTIMES.add(runtime)


def reopen(rt: Any) -> None:
    """Fresh threads and connections for ``rt`` in a forked child."""
    if rt.closed:
        return
    if rt.store is not None:        # SQLite connections must not cross a fork: new ones
        rt.store._conns.forget_after_fork()   # (per thread, opened on next use)
    rt.writer.abandon()
    rt.writer = rt.new_writer()
    if rt.client is not None:
        rt.client.after_fork()
        rt.worker = rt.new_worker()
    rt.ahead = type(rt.ahead)(rt.gateway_attempt, rt.settings.max_sessions)
    rt.counters.add("forks_reopened")


def _in_child() -> None:
    for rt in list(_RUNTIMES):
        try:
            reopen(rt)
        except Exception as exc:    # never break the host's child; say it plainly instead
            rt.closed = True
            rt.warnings.append("this process was forked and the plugin could not restart in "
                               "it (%s): nothing is archived here" % exc)
            log.error("tencentdb-offload: after fork: %s", exc, exc_info=True)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)
