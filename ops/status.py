"""``status``: what the archive says about the engine's sessions, read-only."""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
from pathlib import Path
from typing import Any, Dict, List, Optional

from ..archive import held, readonly
from ..session.record import Compaction, token_counts
from ..hermes.config import hermes_home
from ..hermes.host import known_host
from ..hermes.prompt_cache import with_host_ttl
from ..settings.thresholds import HOST_MINIMUM_CONTEXT, Trigger, applying_trigger
from ..settings.config import Settings
from ..settings.gateway_env import sources_line
from ..status.model import StatusReport, StoreView, read_store_view
from ..status.render import render
from .env import CliError, compression_findings, resolve_settings
from .doctor_store import held_text
from .settings_source import misnamed, overridden


def status_report(store_dir: Path, settings: Settings, recent: int = 10,
                  window: Optional[int] = None) -> StatusReport:
    """The store read without writing it; CliError when it is there but unreadable.
    ``window``: ``model.context_length`` as config.yaml says now (``configured_window``)."""
    report = StatusReport(settings, str(store_dir), host=known_host())
    if store_dir.exists() and not store_dir.is_dir():
        raise CliError("the store directory %s is not a directory" % store_dir)
    db = store_dir / "store.db"
    if readonly.unwritten(db):
        return report
    problem = readonly.problem(db)
    if problem:
        raise CliError(problem)
    report.store_problem = readonly.newer(db)     # readable here, refused by the plugin
    if report.store_problem:
        return report
    try:
        report.store = read_store_view(store_dir, recent)
    except sqlite3.Error as exc:
        raise CliError("cannot read %s: %s" % (db, exc))
    report.trigger = current_trigger(settings, last_trigger(report.store), window, report.host)
    return report


def last_trigger(store: StoreView) -> Optional[Trigger]:
    """The trigger the newest compaction ran under, on its window (None when an older record
    does not say): the window and host rule the engine last had."""
    last = store.compactions.last
    rec = Compaction.from_json(last) if last else None
    if not (rec and rec.trigger and rec.context_length):
        return None
    ratio = rec.model_ratio or None
    return Trigger(rec.trigger, rec.context_length, "compression.model_thresholds" if ratio else "", ratio)


RULES = ((False, False), (True, False), (False, True), (True, True))   # (host floor, messaging gateway)


def current_trigger(settings: Settings, recorded: Optional[Trigger],
                    window: Optional[int] = None, host: Any = None) -> Optional[Trigger]:
    """``recorded`` while ``settings`` still give it on its window (under one of the host's
    rules), else what they give now: a THRESHOLD or cap changed since shows at once. A
    ``window`` other than the recorded one (the model switched) gets the recorded rule on it;
    where several rules gave the recorded trigger (a window none of them changes), the one the
    ``host`` in use applies (``hermes.host.Host``, where this process can tell)."""
    if recorded is None:
        return None
    now = [applying_trigger(settings, recorded.window, host_floor=f, messaging=g,
                            model_ratio=recorded.model_ratio) for f, g in RULES]
    tied = [i for i, t in enumerate(now) if t.tokens == recorded.tokens]
    own = (host.small_window_floor, host.checks_every_request) if host is not None else None
    rule = next((i for i in tied if RULES[i] == own), tied[0] if tied else None)
    if window and window != recorded.window:
        f, g = RULES[rule or 0]
        moved = applying_trigger(settings, window, host_floor=f, messaging=g,
                                 model_ratio=recorded.model_ratio)
        return Trigger(moved.tokens, window, "%smodel.context_length is %s now; the last compaction "
                       "ran on a %s-token window" % (moved.why + "; " if moved.why else "",
                                                     format(window, ","), format(recorded.window, ",")),
                       moved.model_ratio)
    if rule is not None:        # the same trigger, with the rule that makes it (the record omits it)
        return now[rule]
    return Trigger(now[0].tokens, recorded.window, now[0].why or "as configured now; the last "
                   "compaction ran at %s tokens" % format(recorded.tokens, ","))


def configured_store_dir() -> Path:
    """The store this home's settings name, whatever ``--store`` says."""
    env, _config, settings, _warnings = resolve_settings()
    return settings.resolved_store_dir(env)


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve()
    except (OSError, RuntimeError):
        return a == b


def configured_window(config: Any) -> Optional[int]:
    """``model.context_length`` of config.yaml when it is a window Hermes accepts, else None
    (the engine then runs on whatever the host probes)."""
    value = config.get("model", "context_length") if config is not None else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= HOST_MINIMUM_CONTEXT:
        return value
    return None


def known_trigger(store_dir: Path, settings: Optional[Settings] = None,
                  window: Optional[int] = None) -> Optional[Trigger]:
    """The trigger that applies on the window of the newest compaction in ``store_dir``, None
    when there is none to read (doctor's settings line: the store's problems are the store
    check's to report)."""
    try:
        return status_report(store_dir, settings or Settings(), 1, window).trigger
    except (CliError, sqlite3.Error, OSError):
        return None


# which count each token figure of ``status --json`` is
ESTIMATED_FIELDS = ("compactions.tokens_saved", "compactions.recent[].tokens_before",
                    "compactions.recent[].tokens_after", "compactions.recent[].target",
                    "compactions.recent[].prefix_kept", "compactions.recent[].cache.prefix_kept",
                    "compactions.recent[].cache.invalidated", "compactions.recent[].cache.written",
                    "compactions.recent[].cache.written_without", "compactions.cache.written",
                    "compactions.cache.written_without", "sessions[].tokens_saved")
PROVIDER_FIELDS = ("compactions.recent[].cached_before", "compactions.recent[].cache.cached_before")
PRICED_FIELDS = ("compactions.recent[].cache.cost", "compactions.recent[].cache.cost_without",
                 "compactions.recent[].cache.cumulative_cost",
                 "compactions.recent[].cache.cumulative_cost_without", "compactions.cache.cost",
                 "compactions.cache.cost_without")


def held_warning(store_dir: Path, settings: Settings, plugin_dir: Any) -> List[str]:
    """The rows a configured Gateway does not get unasked (``archive/held.py``), as doctor says
    it; nothing when there are none or no configured Gateway waits for them."""
    if not settings.gateway_configured or not settings.gateway_url:
        return []
    db = store_dir / "store.db"
    if readonly.unwritten(db) or readonly.problem(db):     # the store's own line says why
        return []
    try:
        reader = readonly.StoreReader(store_dir)
        try:
            kept = held.held_rows(reader.conn)
        finally:
            reader.close()
    except (sqlite3.Error, OSError):
        return []
    if not kept["rows"]:
        return []
    send, drop = held.commands(plugin_dir)
    return ["%s (send: %s; or keep them here: %s)" % (held_text(settings, kept), send, drop)]


def status_data(report: StatusReport) -> Dict[str, Any]:
    """``status --json``: the keys it has always had, and which count each token figure is."""
    out: Dict[str, Any] = {"store_dir": report.store_dir, "exists": report.store is not None,
                           "settings": report.settings.public()}
    if report.store is not None:
        out.update(report.store.as_dict())
        out["token_counts"] = token_counts(ESTIMATED_FIELDS, PROVIDER_FIELDS, PRICED_FIELDS)
    if report.store_problem:
        out["store_problem"] = report.store_problem
    return out


def cmd_status(args: argparse.Namespace) -> int:
    overrides = {"TENCENTDB_OFFLOAD_STORE_DIR": args.store} if args.store else {}
    env, config, settings, warnings = resolve_settings(overrides)
    settings = with_host_ttl(settings, config, env)     # as the plugin applies it in Hermes
    store_dir = settings.resolved_store_dir(env)
    # config.yaml's window is this home's model: a store that is not this home's (a kept demo
    # or replay, another machine's copy) keeps the window its compactions ran on
    own = not args.store or _same_dir(store_dir, configured_store_dir())
    report = status_report(store_dir, settings, args.recent,
                           configured_window(config) if own else None)
    report.gateway_sources = sources_line(env, config.block())
    report.store_option = args.store or ""
    off, ignored = compression_findings(config)
    if off:
        warnings = ["compression.enabled is false in %s: Hermes never calls the engine, nothing is "
                    "compacted (hermes config set compression.enabled true)" % config.path] + warnings
    if ignored:
        warnings.append("not honoured by this plugin: %s" % ", ".join(ignored))
    warnings += ["%s (fix: %s)" % (message, fix)
                 for _status, message, fix in misnamed(env, config.block(), hermes_home(env), config.path)]
    warnings += [message for _suffix, message, _fix in
                 overridden(os.environ, hermes_home(env), config.path, config.block())]
    warnings += held_warning(settings.resolved_store_dir(env), settings, args.plugin_dir)
    if args.json:
        data = status_data(report)
        data.update(gateway_sources=report.gateway_sources, warnings=warnings,
                    hermes_compression_enabled=not off)
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        print(render(report))
        for w in warnings:
            print("  warning: %s" % w)
    return 0
