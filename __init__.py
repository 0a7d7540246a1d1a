"""tencentdb-offload: a Hermes context engine that offloads compaction to the TencentDB Agent
Memory Gateway and keeps working, losing nothing, without it.

``register(ctx)`` gets the process runtime (built once, see ``host/wiring``) and registers an engine
on it; hooks, the slash command and (on hosts without ``select_context``) the canvas guard are
registered once per process. Nothing in it raises on bad settings: a plugin that fails to load
makes Hermes fall back to its built-in compressor without telling the user.
"""

from __future__ import annotations

from typing import Any

from .host.command import HELP, make_command
from .hermes.host import running_host
from .engine import NAME, TencentDBOffloadEngine
from .hooks import HookHandlers
from .host.wiring import build_runtime, first_time, first_time_for, open_session, shared_runtime
from .common.peer_text import plugin_logger

__version__ = "0.5.0"
log = plugin_logger("tencentdb_offload")


def register(ctx: Any) -> None:
    runtime = shared_runtime()
    ctx.register_context_engine(open_session(runtime))
    # Hook and command registrations are per process: the host stores them once (a host may
    # call register() per agent and warn on a repeated command). A no-op context (the host's
    # engine loader) does not count: it registers nothing.
    real = type(ctx).__name__ != "_EngineCollector"
    # hooks once per plugin manager (a rebuilt manager, e.g. a plugin reload, gets them again)
    if real and first_time_for(getattr(ctx, "_manager", ctx), "hooks"):
        hooks = HookHandlers(runtime)
        ctx.register_hook("post_tool_call", hooks.post_tool_call)
        ctx.register_hook("pre_llm_call", hooks.pre_llm_call)
        # one canvas and one copy of each recall block per request (or select_context does it)
        if not running_host().selects_context and hasattr(ctx, "register_middleware"):
            try:
                ctx.register_middleware("llm_request", hooks.llm_request)
            except Exception as exc:  # an older host: canvases are still stripped at compaction
                log.warning("tencentdb-offload: llm_request middleware unavailable: %s", exc)
    if first_time("command"):
        try:
            ctx.register_command(NAME, make_command(runtime),
                                 description="tencentdb-offload status, health, flush, reclaim",
                                 args_hint="[status|health|flush|reclaim|help]")
        except TypeError:
            ctx.register_command(NAME, make_command(runtime), description="tencentdb-offload status")


__all__ = ["register", "build_runtime", "open_session", "TencentDBOffloadEngine", "HELP",
           "__version__"]
