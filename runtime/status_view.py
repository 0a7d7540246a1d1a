"""The runtime's (``runtime/process.py``) status for Hermes' ``get_status`` and the slash command, as one reader may read it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Dict

from ..archive.refused import requeue_command
from ..archive.visibility import Scope
from ..hermes.host import running_host
from ..status.model import GatewayView, HeldSession, ProcessView, StatusReport, prompt_cache, read_store_view


def as_dict(rt: Any, scope: Scope) -> Dict[str, Any]:
    """The status as a dict (what Hermes' ``get_status`` carries): built from the record;
    errors as ``scope`` may read them."""
    totals = rt.registry.totals.as_dict()
    out: Dict[str, Any] = {
        "mode": rt.mode, "settings": rt.settings.public(),
        "sessions_in_memory": len(rt.registry), "sessions_evicted": rt.registry.evictions,
        "compactions_ahead": rt.ahead.status(), "totals": totals,
        "prompt_cache": prompt_cache(totals, rt.settings.cache_ttl_s),
        "counters": rt.counters.as_dict(), "pending_writes": rt.writer.pending(),
        "writer": rt.writer.stats(), "store_error": rt.store_error or rt.writer.last_error,
        "warnings": list(rt.warnings), "recent_errors": rt.errors.lines(scope),
        "reclaim": {"retention_days": rt.reclaimer.retention_days,
                    "last_result": rt.reclaimer.last_result,
                    "last_error": rt.reclaimer.last_error,
                    "clock_warning": rt.reclaimer.clock_warning}}
    if rt.store is not None:
        try:
            out["store"] = rt.store.stats().as_dict()
            if out["store"].get("outbox_dead"):
                out["outbox_refused"] = {
                    "rows": out["store"]["outbox_dead"], "reasons": rt.store.refused(),
                    "requeue": requeue_command(Path(__file__).resolve().parent.parent)}
        except Exception as exc:
            out["store"] = {"error": str(exc)}
    if rt.client is not None:
        out["gateway"] = rt.client.status()
        out["gateway"]["delivered_this_process"] = rt.worker.delivered if rt.worker else 0
        out["gateway"]["worker_error"] = rt.worker.last_error if rt.worker else ""
    return out


def record(rt: Any, recent: int, scope: Scope) -> StatusReport:
    """The status the slash command renders: this process, the store as every process left
    it (read as ``status`` reads it, after this process's writes are on disk), the Gateway;
    what ``scope`` may read (``status/render.py`` renders it so)."""
    rt.flush_writes()
    report = StatusReport(rt.settings, str(rt.store.directory) if rt.store else "",
                          trigger=rt.registry.newest_trigger(), scope=scope, host=running_host(),
                          warnings=list(rt.warnings), recent_errors=rt.errors.lines(scope))
    report.process = ProcessView(
        rt.mode, len(rt.registry), rt.registry.evictions,
        [HeldSession(x.key, x.processed_ids.count, x.stats.compactions) for x in rt.registry.all()],
        rt.registry.totals.as_dict(), rt.writer.stats(), rt.store_error or rt.writer.last_error)
    report.store_problem = report.process.store_error
    if rt.store is not None and not report.store_problem:
        try:
            report.store = read_store_view(rt.store.directory, recent)
        except sqlite3.Error as exc:
            report.store_problem = "cannot read %s: %s" % (rt.store.path, exc)
    if rt.client is not None:
        report.gateway = GatewayView.of(rt.client, rt.settings)
    return report
