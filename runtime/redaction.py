"""What the runtime masks: secrets bound for the Gateway (``REDACT``, on by default) and, when
the user asks, secrets at rest in the local archive (``REDACT_ARCHIVE``), and the count of
what was masked, per conversation, for status and the report (never the secret itself)."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from ..archive.store import Store
from ..common.peer_text import plugin_logger
from ..context.redact import Redactor, strict

log = plugin_logger("tencentdb_offload")
EVENT = "redaction"         # store event: {"route": the Gateway route, "texts": how many masked}


def gateway_redaction(rt: Any) -> Dict[str, Any]:
    """The Gateway client's redactor and its count, for ``GatewayClient(**…)``."""
    return {"redactor": Redactor(rt.settings.redact), "on_masked": _recorder(rt)}


def at_rest(settings: Any) -> Optional[Callable[[str], str]]:
    """The mask the archive and outbox apply on the writer thread (None: originals kept)."""
    return strict if settings.redact_archive else None


def _recorder(rt: Any) -> Callable[[str, str, int], None]:
    def masked(gateway_id: str, route: str, texts: int) -> None:
        """Counted under the conversation whose Gateway session it is (the id itself for a
        conversation no longer held); never raises: a count must not stop a send."""
        try:
            key = next((s.key for s in rt.registry.all() if s.gateway_id == gateway_id), gateway_id)
            rt.counters.add("texts_masked", texts)
            rt.writer.submit(Store.op_event(key, EVENT, {"route": route.rsplit("/", 1)[-1],
                                                         "texts": texts}, rt.now()))
        except Exception:   # noqa: BLE001
            log.debug("tencentdb-offload: redaction count not recorded", exc_info=True)
    return masked
