"""doctor's checks for a switch from hermes-lcm (LCM-X): what is left of it, and its old store.

A half-done switch is common: ``context.engine`` still names LCM (Hermes runs LCM, not this
plugin), or LCM's plugin stays enabled beside this one (its tools and its writes go on), or
``LCM_*`` settings remain that this plugin does not read. Each row says what it means and the
command that fixes it. LCM's threshold (``LCM_CONTEXT_THRESHOLD``, else ``lcm.context_threshold``
of config.yaml) is carried over by the one command doctor prints: the switch's documentation
names none. The LCM store found is reported with its size, as the recall tools will search it
(read-only); where none is found, where doctor looked. LCM-X renamed itself in v0.24 (plugin
``hermes-lcm-x``, engine ``lcm-x``; ``hermes-lcm`` and ``lcm`` are its old names). Rows are dicts
in ``doctor.Checks.add``'s shape; none when no trace of LCM is found. Writes nothing.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..archive.lcm_history import PATH_VARS, LcmHistory, LcmUnavailable, payload_dir, store_path, unavailable
from ..hermes.config import ConfigFile
from ..hermes.host import Host
from ..settings.config import PREFIX, load_settings
from ..settings.thresholds import trigger_text

NAME, PASS, WARN, FAIL = "lcm", "pass", "warn", "fail"
PLUGIN = "tencentdb-offload"
ENGINES = ("lcm", "lcm-x")              # LCM-X's engine since v0.24; the old name is its alias
PLUGINS = ("hermes-lcm", "hermes_lcm", "hermes-lcm-x", "hermes_lcm_x", "lcm", "lcm-x", "lcm_x")
ENGINE_FIX = "hermes config set context.engine %s" % PLUGIN


def _row(status: str, message: str, fix: str = "") -> Dict[str, str]:
    return {"name": NAME, "status": status, "message": message, "fix": fix}


def _listed(value: Any) -> List[str]:
    return [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)] \
        if isinstance(value, list) else []


def _engine(config: ConfigFile) -> List[Dict[str, str]]:
    engine = config.get("context", "engine")
    if engine in ENGINES:
        return [_row(FAIL, "context.engine in %s is still %r (hermes-lcm / LCM-X): Hermes runs LCM, "
                     "not this plugin" % (config.path, engine), ENGINE_FIX)]
    return []


def _plugins(config: ConfigFile, release: Optional[Host] = None) -> List[Dict[str, str]]:
    """``release``: what the Hermes on PATH does (None: not known). Where its ``hermes plugins``
    commands work offline, the fix is theirs: that Hermes' ``hermes config set`` stores a
    list as text (doctor's config row then fails), as docs/switching-from-lcm.md says."""
    enabled = _listed(config.get("plugins", "enabled"))
    lcm = [n for n in enabled if n in PLUGINS]
    if not lcm:
        return []
    keep = [n for n in enabled if n not in PLUGINS] + ([] if PLUGIN in enabled else [PLUGIN])
    where = ("beside %s" % PLUGIN if PLUGIN in enabled else
             "and not %s (its list is %s)" % (PLUGIN, json.dumps(enabled)))
    if release is not None and not release.plugin_commands_need_network:
        fix = " && ".join(["hermes plugins disable %s" % shlex.quote(n) for n in lcm] +
                          ([] if PLUGIN in enabled else ["hermes plugins enable %s" % PLUGIN]))
    else:
        fix = "hermes config set plugins.enabled %s" % shlex.quote(json.dumps(keep))
    return [_row(WARN, "plugins.enabled in %s still lists %s %s: its tools (lcm_grep, lcm_expand, "
                 "...) stay in every request and it keeps writing its store"
                 % (config.path, ", ".join(lcm), where), fix)]


def _lcm_threshold(env: Mapping[str, str], config: ConfigFile) -> Tuple[str, str]:
    """(LCM's threshold as written, where) as LCM-X reads it: ``LCM_CONTEXT_THRESHOLD``, else
    ``lcm.context_threshold`` of config.yaml; ("", "") when neither sets one."""
    value = env.get("LCM_CONTEXT_THRESHOLD", "").strip()
    if value:
        return value[:20], "LCM_CONTEXT_THRESHOLD=%s" % value[:20]
    block = config.get("lcm")
    raw = block.get("context_threshold") if isinstance(block, Mapping) else None
    if isinstance(raw, (int, float, str)) and not isinstance(raw, bool) and str(raw).strip():
        return str(raw).strip()[:20], "lcm.context_threshold: %s in %s" % (str(raw).strip()[:20], config.path)
    return "", ""


def threshold_fix(value: str, settings: Any) -> str:
    """The command that carries LCM's threshold over, as a valid pair: a threshold at or under
    this plugin's COMPACT_RATIO (LCM-X's default 0.35 is under its 0.45) brings the ratio down
    to two thirds of it, as the plugin itself would; '' when the value is no threshold."""
    parsed, warnings = load_settings({PREFIX + "THRESHOLD": value})
    if any(w.startswith(PREFIX + "THRESHOLD=") for w in warnings):
        return ""
    fix = "hermes config set tencentdb_offload.threshold %s" % shlex.quote(value)
    if settings.compact_ratio >= parsed.threshold:
        fix += " && hermes config set tencentdb_offload.compact_ratio %g" % round(parsed.threshold * 2 / 3, 2)
    return fix


def _settings(env: Mapping[str, str], config: ConfigFile, settings: Any,
              release: Optional[Host] = None) -> List[Dict[str, str]]:
    ignored = sorted(k for k in env if k.startswith("LCM_") and k not in PATH_VARS)
    rows = []
    value, where = _lcm_threshold(env, config)
    fix = threshold_fix(value, settings) if value else ""
    if value and not settings.threshold_explicit:
        same = fix and abs(load_settings({PREFIX + "THRESHOLD": value})[0].threshold - settings.threshold) < 1e-9
        if same:
            rows.append(_row(PASS, "%s was hermes-lcm's trigger, the same as this plugin's (%g of the "
                             "window): nothing to carry over" % (where, settings.threshold)))
        elif fix:
            # as the settings row says it: on a host with the small-window floor, not 0.75
            rows.append(_row(WARN, "%s was hermes-lcm's trigger; this plugin's, until you carry "
                             "it over (its own %sTHRESHOLD): %s"
                             % (where, PREFIX, trigger_text(settings, None, release)), fix))
        else:
            rows.append(_row(WARN, "%s was hermes-lcm's trigger and is no fraction this plugin takes "
                             "(above 0 and at most 1); it compacts at %g of the window"
                             % (where, settings.threshold),
                             "hermes config set tencentdb_offload.threshold 0.75   # or the fraction you want"))
    if ignored:
        rows.append(_row(PASS, "%s: hermes-lcm settings this plugin ignores (keep them only to switch "
                         "back; %s is read only to find the old store)"
                         % (", ".join(ignored[:12]) + (", ..." if len(ignored) > 12 else ""),
                            PATH_VARS[0])))
    return rows


# what hermes-lcm's next open would do; moving lcm.db without its -journal would keep half a write
ROLL_BACK = ("python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute(\"PRAGMA "
             "quick_check\").fetchall()' %s   # rolls the interrupted write back; keep the -journal beside it")


def _looked(env: Mapping[str, str]) -> str:
    """Why the store is looked for where it is (``store_path``'s order, in words)."""
    for var in PATH_VARS:
        if (env.get(var) or "").strip():
            return "%s names it" % var
    return "%s is not set: LCM's default place, $HERMES_HOME/lcm.db" % PATH_VARS[0]


def _store(env: Mapping[str, str], settings: Any, named: bool = False) -> List[Dict[str, str]]:
    """``named``: the config or the environment names LCM, so "no store" is worth saying."""
    setting = settings.lcm_history
    if setting == "off":
        found = store_path("auto", env)
        if found is not None and found.is_file():
            return [_row(PASS, "hermes-lcm store %s is not searched (%sLCM_HISTORY=off)" % (found, PREFIX))]
        return []
    history = LcmHistory(store_path(setting, env) or Path(), payload_dir(env))
    if not history.exists():
        if setting != "auto":
            return [_row(WARN, "%sLCM_HISTORY names %s, which is not a file" % (PREFIX, history.path),
                         "set %sLCM_HISTORY to the path of lcm.db, or to auto" % PREFIX)]
        if named:
            return [_row(PASS, "no hermes-lcm store found: looked for %s (%s); nothing of LCM's "
                         "history to search. If LCM kept it elsewhere, set %sLCM_HISTORY=PATH"
                         % (history.path, _looked(env), PREFIX))]
        return []
    try:
        n = history.counts()
    except LcmUnavailable as exc:
        fix = ("stop hermes-lcm (see the plugins.enabled row) and restart Hermes" if "locked" in str(exc)
               else ROLL_BACK % shlex.quote(str(history.path)) if "hot journal" in str(exc)
               else "move it aside, or set %sLCM_HISTORY=off to stop searching it" % PREFIX)
        return [_row(WARN, unavailable(str(exc)), fix)]
    try:
        kept = sum(1 for p in history.payloads.iterdir() if p.suffix == ".json") \
            if history.payloads.is_dir() else 0
    except OSError:
        kept = 0
    return [_row(PASS, "hermes-lcm store %s: %d messages in %d sessions; tdai_offload_search and "
                 "archive search read it read-only (never written)%s"
                 % (history.path, n["messages"], n["sessions"],
                    "; the %d outputs LCM-X kept outside it, in %s, are read where a message is "
                    "their stub" % (kept, history.payloads) if kept else ""))]


def lcm_checks(env: Mapping[str, str], config: ConfigFile, settings: Any, home: Path,
               release: Optional[Host] = None) -> List[Dict[str, str]]:
    """doctor rows for what hermes-lcm left behind ([] when nothing); ``release``: what the
    Hermes on PATH does (None: not known)."""
    del home        # the store's default place comes from env (HERMES_HOME) like the plugin's
    rows = _engine(config) + _plugins(config, release) + _settings(env, config, settings, release)
    named = bool(rows) or isinstance(config.get("lcm"), Mapping) or any(k.startswith("LCM_") for k in env)
    return rows + _store(env, settings, named)
