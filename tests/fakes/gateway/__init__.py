"""A faithful fake of the TencentDB Agent Memory Gateway "offload V2" API, for tests.

Stdlib only. Mirrors the shared gateway-contract.md research notes (measured on the real
Gateway v2.0.1-beta.2), including its bugs, because the plugin must survive them:

* routes ``POST /v2/offload/{ingest,compact,query-mmd}`` (trailing slash tolerated),
  ``GET /health``; everything else 404 ``{"error": "Not found: <METHOD> <path>"}``;
* auth (Bearer always required, ``x-tdai-service-id`` required, optional API key),
  router envelopes vs. legacy error shapes, gzip/deflate bodies, a decompressed-body
  limit that answers with a connection *reset*;
* zod-like validation (400 with a JSON-serialised issues array as ``message``);
* deterministic, synchronous stand-ins for the LLM stages (L1 summaries, L1.5 task
  canvases, L2 canvas nodes) with the real boundary/string-comparison rule;
* compaction (§4) step by step: overhead, fast-path replay (incl. the OpenAI dangling
  ``tool_calls`` gap), mild / aggressive / emergency (incl. MMD messages put back at
  index 0, before the system message), history and active canvas injection;
* faults: ``refuse``, ``hang``, ``5xx``, ``409``, ``reset``, ``garbage``, ``wrong_shape``, ``proxy_404``, ``route_404``;
  ``latency_s`` delays every answer (a slow but healthy Gateway); ``tamper`` (a function of
  the reply's message list) makes a lying Gateway that answers well-formed JSON; ``slow_compact()`` makes
  ``/compact`` take as long as the real one did on a loaded 2-core machine (3.2 s per 100K
  tokens of ``total_tokens``, concurrent calls overlapping), so a host's compression pool fills.

Usage::

    with FakeGateway(api_key="k") as gw:
        client = MyClient(gw.url, api_key="k")
        gw.set_fault("5xx", paths=("/v2/offload/compact",))

Manual run: ``python3 tests/fakes/gateway [--port N] [--api-key K]`` (or, from tests/,
``python3 -m fakes.gateway ...``).

Modules: ``server`` (FakeGateway, main), ``transport`` (HTTP plumbing, faults), ``validate``
(zod-like 400s), ``stages`` (sessions on disk, ingest L1/L1.5/L2, query-mmd), ``compaction``
(§4 levels), ``canvas`` (MMD injection), ``messages`` (message helpers), ``common``
(constants, record, token estimate).
"""

from __future__ import annotations

from .common import (
    COMPACT, FAULT_KINDS, INGEST, QUERY_MMD, REAL_COMPACT_SECONDS_PER_100K, Recorded, estimate_message_tokens,
)
from .server import FakeGateway

__all__ = ["FakeGateway", "Recorded", "estimate_message_tokens", "FAULT_KINDS", "INGEST",
           "COMPACT", "QUERY_MMD", "REAL_COMPACT_SECONDS_PER_100K"]
