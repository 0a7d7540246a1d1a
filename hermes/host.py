"""What the host does, described once: the plugin asks this, never which Hermes release runs.

The description is made the first time it is asked, from what the running Hermes offers: its
``ContextEngine`` base class (``compat``) and the marker its messaging gateway sets in the
process environment before any plugin loads. Outside Hermes (demo, replay, unit tests) it is a
host that does none of these things. Which release does what is in docs/hosts.md; a new
Hermes means reading it against these facts here, nowhere else.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Optional

from . import compat


@dataclass(frozen=True)
class Host:
    """The facts about the host the plugin's decisions depend on."""

    # calls ``select_context`` before every request (the canvas goes in per request there)
    # and checks the request's size against the trigger before sending it (its preflight)
    selects_context: bool = False
    # runs ``compress()`` on a compression pool shared by every agent of the process, which
    # refuses work when busy: a compaction must not wait on the pool it runs in
    pools_compression: bool = False
    # its built-in never triggers before 0.85 of a window its 64K minimum binds: on such a
    # window the engine does not trigger earlier than the built-in would
    small_window_floor: bool = False
    # this process is Hermes' messaging gateway: many users' conversations in one process,
    # and the slash command answers whoever sends it
    messaging_gateway: bool = False
    # loads the engine ``context.engine`` names from plugins/<name> even when
    # ``plugins.enabled`` does not list it (the plugin's hooks and tools still need the list)
    loads_engine_unlisted: bool = False
    # its ``hermes plugins`` commands fetch a package manager first: without network they
    # fail, so a fix that must work offline edits config.yaml instead
    plugin_commands_need_network: bool = False

    @property
    def checks_every_request(self) -> bool:
        """The messaging gateway of a host that selects context: every request is checked
        before it leaves, so a later trigger and a lower landing are safe there."""
        return self.selects_context and self.messaging_gateway


def describe() -> Host:
    """The running host, from what it offers (see the module doc). On every release so far a
    ``ContextEngine`` with ``select_context`` comes with every other fact but the messaging
    gateway, which the process says itself (docs/hosts.md)."""
    selects = compat.INSIDE_HERMES and hasattr(compat.ContextEngine, "select_context")
    return Host(selects_context=selects, pools_compression=selects, small_window_floor=selects,
                messaging_gateway=os.environ.get("_HERMES_GATEWAY") == "1",
                loads_engine_unlisted=selects, plugin_commands_need_network=selects)


_current: Optional[Host] = None
_lock = threading.Lock()


def running_host() -> Host:
    """The host this process runs in, described once."""
    global _current
    if _current is None:
        with _lock:
            if _current is None:
                _current = describe()
    return _current


def known_host() -> Optional[Host]:
    """The running host where this process can tell (inside Hermes, or the command line run
    with Hermes' Python); None where it cannot (the command line with a Python without Hermes):
    a surface that describes the host then says what may apply."""
    return running_host() if compat.INSIDE_HERMES else None
