"""The ``/tencentdb-offload`` slash command: status, health, flush, reclaim, help."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..common.humanize import plural, printable
from ..status.model import GatewayView
from ..status.render import NO_GATEWAY, render

if TYPE_CHECKING:
    from ..runtime.process import Runtime

HELP = """/tencentdb-offload [subcommand]
  status   (default) the last compaction first, then mode, thresholds, sessions,
           compactions, levels, tokens saved, archive size, Gateway health and breaker,
           outbox backlog, last errors
  health   probe the Gateway now (GET /health)
  flush    deliver the ingest outbox to the Gateway now (waits up to 10 s)
  reclaim  delete archive/outbox data older than TENCENTDB_OFFLOAD_RETENTION_DAYS
  help     this text
In `hermes chat -q` this text goes to the model as a prompt; for a one-shot status run
`python3 <plugin dir> status` instead."""


def saved_text(runtime: "Runtime") -> str:
    """Whether the archive's writes are on disk now (a missing, busy or failing store holds
    them in memory, retried): never claimed when they are not."""
    if runtime.flush_writes(10.0):
        return "archive writes saved to disk"
    writer = runtime.writer
    return "archive writes NOT saved yet (%s)" % (
        writer.last_error or "%s still being written" % plural(writer.pending(), "write"))


def flush_text(runtime: "Runtime") -> str:
    """What ``flush`` did, truthfully: nothing is sent without a Gateway or while it is down."""
    saved = saved_text(runtime)
    if runtime.worker is None:
        return ("%s; nothing sent: the Gateway is off (local mode), so there is no outbox to "
                "deliver" % saved)
    done = runtime.flush(None, 10.0)
    holding = bool(getattr(runtime.settings, "gateway_configured", False))
    left = (runtime.store.backlog(hold_unconfigured=True) if holding else runtime.store.backlog()) \
        if runtime.store else 0
    held = runtime.store.held() if runtime.store and holding else 0
    kept = ("; %s queued while no Gateway was configured held, not sent (python3 <plugin dir> "
            "outbox send-held sends them)" % plural(held, "row")) if held else ""
    gw = GatewayView.of(runtime.client, runtime.settings) if runtime.client else None
    if gw is None or gw.looks_unused:       # local mode: nothing was sent, even with no backlog
        return ("%s; nothing sent: %s; %s kept in case a Gateway answers at the default URL"
                % (saved, NO_GATEWAY, plural(left, "row")))
    if done and not left:
        return "outbox delivered: nothing waiting for the Gateway" + kept
    why = runtime.worker.last_error or gw.last_error or "health %s, breaker %s" % (
        gw.health, gw.breaker_state)
    return "outbox not delivered: %s waiting (kept on disk, sent when the Gateway answers); %s%s" % (
        plural(left, "row"), why, kept)


def make_command(runtime: "Runtime") -> Callable[[str], str]:
    def handler(raw_args: str = "", *_: Any, **__: Any) -> str:
        return printable(answer(raw_args))          # Gateway errors and versions are peers' text

    def answer(raw_args: str) -> str:
        words = (raw_args or "").split()
        sub = words[0].lower() if words else "status"
        try:
            if sub == "status":
                return render(runtime.status_record())      # as whoever sent it may read it
            if sub == "help":
                return HELP
            if sub == "health":
                h = runtime.health()
                if h["ok"]:
                    return "Gateway up: status %s, version %s, %.1f ms" % (
                        h["status"], h["version"] or "?", h["latency_ms"])
                if runtime.client is not None and not runtime.settings.gateway_configured \
                        and not runtime.client.answered:        # the default URL, never answered
                    return ("no Gateway configured (local mode): nothing answers at the default "
                            "URL %s (%s); set TENCENTDB_OFFLOAD_GATEWAY_URL to your Gateway's URL, "
                            "or off" % (runtime.client.base_url, h["reason"]))
                return "Gateway not usable: %s" % h["reason"]
            if sub == "flush":
                return flush_text(runtime)
            if sub == "reclaim":
                if runtime.reclaimer.retention_days <= 0:
                    return "retention is off (TENCENTDB_OFFLOAD_RETENTION_DAYS=0): nothing deleted"
                if runtime.store is None:
                    return "nothing deleted: the archive is unavailable (%s)" % (
                        runtime.store_error or "see /tencentdb-offload status")
                counts = runtime.reclaimer.run()
                if runtime.reclaimer.last_error:
                    return runtime.reclaimer.last_error
                return "reclaimed: " + ", ".join("%s %d" % kv for kv in sorted(counts.items()))
        except Exception as exc:
            return "tencentdb-offload %s failed: %s" % (sub, exc)
        # a pasted paragraph is not repeated back whole: its start names it
        return "unknown subcommand %r\n%s" % (printable(sub, 40), HELP)
    return handler
