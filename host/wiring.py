"""Putting the plugin together: the process runtime and engines bound to a conversation.

One runtime per process and ``HERMES_HOME``. A host may call ``register(ctx)`` once per
agent and may import this package twice (``hermes_plugins.<slug>`` for the hooks and
``_hermes_user_context_engine.<name>`` for the engine) or re-import it; module globals would
give each copy its own writer, sender and session state. So the live runtimes are kept in one
process-wide namespace in ``sys.modules``, shared by every copy. ``open_session`` is the one way
to get an engine bound to a conversation (register, tests, bench and the demo driver use it).
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import types
import weakref
from typing import Any, Mapping, Optional

from ..settings.config import hermes_home, load_settings
from ..hermes.config import read_config
from ..hermes.prompt_cache import with_host_ttl
from ..engine import TencentDBOffloadEngine
from ..runtime.process import Runtime

_PROCESS_KEY = "_tencentdb_offload_process"


def _process() -> types.ModuleType:
    space = sys.modules.get(_PROCESS_KEY)
    if space is None:
        space = types.ModuleType(_PROCESS_KEY, "tencentdb-offload: runtimes shared by every copy")
        space.lock = threading.Lock()           # type: ignore[attr-defined]
        space.runtimes = {}                     # type: ignore[attr-defined]
        space.registered = set()                # type: ignore[attr-defined]
        space = sys.modules.setdefault(_PROCESS_KEY, space)
    return space


def build_runtime(env: Optional[Mapping[str, str]] = None, block: Any = None,
                  host_config: Any = None) -> Runtime:
    """A new runtime from ``env`` (default: the process environment), a config block and
    Hermes' config.yaml (its ``prompt_caching.cache_ttl``, where ``CACHE_TTL_S`` is unset)."""
    env = os.environ if env is None else env
    settings, warnings = load_settings(env, block)
    settings = with_host_ttl(settings, host_config, env)
    return Runtime(settings, warnings, env)


def shared_runtime() -> Runtime:
    """The process's runtime for the current ``HERMES_HOME``, built on first use."""
    space = _process()
    home = str(hermes_home(os.environ))
    with space.lock:
        runtime = space.runtimes.get(home)
        if runtime is None or runtime.closed:
            runtime = _runtime_or_safe_default(home)
            space.runtimes[home] = runtime
            atexit.register(runtime.close)
        return runtime


def _runtime_or_safe_default(home: str) -> Runtime:
    """Settings never raise; if anything else does, the plugin still loads, local-only with
    defaults, and says why (a plugin that fails to load is silently replaced by Hermes)."""
    try:
        config = read_config(hermes_home())
        return build_runtime(block=config.block(), host_config=config)
    except Exception as exc:
        runtime = build_runtime(env={"HERMES_HOME": home, "TENCENTDB_OFFLOAD_GATEWAY_URL": "off"})
        runtime.note_error("could not start with your settings (%s: %s); running local-only "
                           "with defaults" % (type(exc).__name__, exc))
        return runtime


def first_time_for(owner: Any, what: str) -> bool:
    """True once per live ``owner`` (a plugin manager) for ``what``. By identity, not by
    ``id()``: a rebuilt manager can take the freed address of the old one and would get no
    hooks at all."""
    space = _process()
    with space.lock:
        owners = getattr(space, "owners", None)
        if owners is None:
            owners = space.owners = weakref.WeakKeyDictionary()     # type: ignore[attr-defined]
        try:
            done = owners.setdefault(owner, set())
        except TypeError:       # not weakly referable: its address, the best there is
            done = space.registered
            what = "%s:%x" % (what, id(owner))
        if what in done:
            return False
        done.add(what)
        return True


def first_time(what: str) -> bool:
    """True once per process for ``what`` (a registration that must not be repeated)."""
    space = _process()
    with space.lock:
        if what in space.registered:
            return False
        space.registered.add(what)
        return True


def open_session(runtime: Runtime, session_id: str = "", context_length: int = 0, model: str = "",
                 **start: Any) -> TencentDBOffloadEngine:
    """An engine on ``runtime``, sized for ``context_length`` and bound to ``session_id`` when
    given (``register`` hands Hermes an unbound one: the host sizes and binds it)."""
    engine = TencentDBOffloadEngine(runtime)
    if context_length or model:
        engine.update_model(model=model, context_length=context_length)
    if session_id:
        engine.on_session_start(session_id, **start)
    return engine
