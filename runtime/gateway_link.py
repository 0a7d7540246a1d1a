"""The runtime's link to the Gateway: the client its settings describe, and a probe of it now.

The client is built at start, or on the writer thread when a store that could not be opened
at start opens later (``Runtime.use_store`` publishes it with its sender).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Dict, Optional

from ..memory_gateway.client import CircuitBreaker, GatewayClient, GatewayError
from ..memory_gateway.ingest import IngestWorker
from ..settings.config import Settings


def client_for(settings: Settings, shared_dir: Path, **redaction: Any) -> GatewayClient:
    """``redaction``: the client's redactor and its count (``runtime/redaction``)."""
    return GatewayClient(
        settings.gateway_url, settings.api_key, settings.instance_id,
        timeout_ms=settings.timeout_ms, ingest_timeout_ms=settings.ingest_timeout_ms,
        body_limit=settings.body_limit, breaker=CircuitBreaker(),
        probe_timeout_s=min(1.0, settings.ingest_timeout_ms / 1000.0), shared_dir=shared_dir,
        **redaction)


def probe(client: Optional[GatewayClient], worker: Optional[IngestWorker]) -> Dict[str, Any]:
    """Probe the Gateway now (for ``/tencentdb-offload health`` and doctor), answering
    within the probe timeout (at most 1 s) whatever the Gateway does; a Gateway found back
    wakes the sender."""
    if client is None:
        return {"ok": False, "reason": "no Gateway configured (local mode)"}
    started = time.monotonic()
    try:
        data = client.health(force=True, timeout=client.probe_timeout)
    except GatewayError as exc:
        return {"ok": False, "reason": str(exc), "shared": client.shared_status()}
    if not client.available:
        client.breaker.record_success()
        if worker is not None:
            worker.wake()
    return {"ok": True, "status": data.get("status"), "version": data.get("version", ""),
            "latency_ms": round((time.monotonic() - started) * 1000, 1)}
