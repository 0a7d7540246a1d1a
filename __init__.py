"""tencentdb-offload: a Hermes context engine that offloads compaction to the TencentDB
Agent Memory Gateway and keeps working, losing nothing, without it.

``register(ctx)`` builds the per-process runtime and registers the engine, the hooks, the
canvas guard and the slash command. All logic lives in the modules it imports.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from .command import HELP, make_command
from .config import load_settings, read_config_block
from .engine import NAME, TencentDBOffloadEngine
from .hooks import HookHandlers
from .runtime import Runtime

__version__ = "0.1.0"
log = logging.getLogger("tencentdb_offload")
_current: Optional[Runtime] = None   # the live runtime, for the CLI and tests


def build_runtime(env: Any = None, block: Any = None) -> Runtime:
    import os
    env = os.environ if env is None else env
    settings, warnings = load_settings(env, block)
    return Runtime(settings, warnings, env)


def register(ctx: Any) -> None:
    global _current
    if _current is not None:
        _current.close()
    runtime = build_runtime(block=read_config_block())
    _current = runtime
    engine = TencentDBOffloadEngine(runtime)
    hooks = HookHandlers(runtime)
    ctx.register_context_engine(engine)
    ctx.register_hook("post_tool_call", hooks.post_tool_call)
    ctx.register_hook("pre_llm_call", hooks.pre_llm_call)
    if runtime.settings.canvas and hasattr(ctx, "register_middleware"):
        try:
            ctx.register_middleware("llm_request", hooks.llm_request)
        except Exception as exc:  # an older host: canvases are still stripped at compaction
            log.warning("tencentdb-offload: llm_request middleware unavailable: %s", exc)
    try:
        ctx.register_command(NAME, make_command(runtime),
                             description="tencentdb-offload status, health, flush, reclaim",
                             args_hint="[status|health|flush|reclaim|help]")
    except TypeError:
        ctx.register_command(NAME, make_command(runtime), description="tencentdb-offload status")


__all__ = ["register", "build_runtime", "TencentDBOffloadEngine", "HELP", "__version__"]
