"""The host's ``ContextEngine`` base class, or a stand-in with the same defaults outside Hermes.

Inside Hermes the engine must subclass the real ABC (the host checks ``isinstance``). The demo,
the replay and the unit tests run without Hermes; they get this stand-in, which carries the
newest host API's defaults (0.22: ``select_context``, ``on_turn_complete`` …) so the engine's
own methods are exercised the same way. What the host does is described in ``host.py``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..common.peer_text import plugin_logger

log = plugin_logger("tencentdb_offload")


def _host_base() -> Tuple[Any, str]:
    """Hermes' ``ContextEngine`` (None outside Hermes) and, when Hermes is there but its
    module fails to import, why: the engine would then subclass the stand-in, the host would
    reject it and silently use its built-in compressor, so that must be said loudly."""
    try:
        from agent.context_engine import ContextEngine as base  # type: ignore
        return base, ""
    except ModuleNotFoundError as exc:
        if exc.name in ("agent", "agent.context_engine"):
            return None, ""                 # not inside Hermes: the stand-in is right
        why = exc
    except Exception as exc:    # noqa: BLE001 - anything Hermes' module raises is reported
        why = exc
    return None, ("importing Hermes' agent.context_engine failed (%s: %s): Hermes will not "
                  "accept this engine and compacts with its built-in compressor instead"
                  % (type(why).__name__, why))


_HOST_BASE, HOST_IMPORT_ERROR = _host_base()
INSIDE_HERMES = _HOST_BASE is not None
if HOST_IMPORT_ERROR:
    log.error("tencentdb-offload: %s", HOST_IMPORT_ERROR)


class _StandIn:
    """The host's defaults, for runs without Hermes (demo, replay, unit tests)."""

    last_prompt_tokens = 0
    last_completion_tokens = 0
    last_total_tokens = 0
    threshold_tokens = 0
    context_length = 0
    compression_count = 0
    threshold_percent = 0.75
    protect_first_n = 3
    protect_last_n = 6
    emit_automatic_compaction_status = True

    def should_compress_info(self, prompt_tokens: Optional[int] = None) -> Tuple[bool, Optional[str]]:
        return self.should_compress(prompt_tokens), None  # type: ignore[attr-defined]

    def prune_tool_results_only(self, messages: List[Dict[str, Any]],
                                current_tokens: Optional[int] = None) -> Tuple[List[Dict[str, Any]], int]:
        return messages, 0

    def select_context(self, request_messages: List[Dict[str, Any]], **_: Any) -> Any:
        return None

    def on_turn_complete(self, messages: List[Dict[str, Any]], usage: Any = None, **_: Any) -> None:
        return None

    def get_automatic_compaction_status_message(self, *, phase: str, default_message: str,
                                                **_: Any) -> Optional[str]:
        return default_message

    def on_session_reset(self) -> None:
        self.last_prompt_tokens = 0
        self.last_completion_tokens = 0
        self.last_total_tokens = 0
        self.compression_count = 0


ContextEngine: Any = _HOST_BASE or _StandIn
