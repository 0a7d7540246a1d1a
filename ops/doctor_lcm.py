"""doctor's checks for a switch from hermes-lcm (LCM-X): what is left of it, and its old store.

A half-done switch is common: ``context.engine`` still names LCM (Hermes runs LCM, not this
plugin), or LCM's plugin stays enabled beside this one (its tools and its writes go on), or
``LCM_*`` settings remain that this plugin does not read. Each row says what it means and the
command that fixes it. The LCM store found is reported with its size, as the recall tools will
search it (read-only). Rows are dicts in ``doctor.Checks.add``'s shape; none when no trace of
LCM is found. Writes nothing.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Dict, List, Mapping

from ..archive.lcm_history import PATH_VARS, LcmHistory, LcmUnavailable, store_path, unavailable
from ..hermes.config import ConfigFile
from ..settings.config import PREFIX

NAME, PASS, WARN, FAIL = "lcm", "pass", "warn", "fail"
PLUGIN = "tencentdb-offload"
ENGINES = ("lcm", "lcm-x")                                   # LCM-X still accepts the old name
PLUGINS = ("hermes-lcm", "hermes_lcm", "lcm", "lcm-x", "lcm_x")
ENGINE_FIX = "hermes config set context.engine %s" % PLUGIN


def _row(status: str, message: str, fix: str = "") -> Dict[str, str]:
    return {"name": NAME, "status": status, "message": message, "fix": fix}


def _listed(value: Any) -> List[str]:
    return [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)] \
        if isinstance(value, list) else []


def _engine(config: ConfigFile) -> List[Dict[str, str]]:
    engine = config.get("context", "engine")
    if engine in ENGINES:
        return [_row(FAIL, "context.engine in %s is still %r (hermes-lcm): Hermes runs hermes-lcm, "
                     "not this plugin" % (config.path, engine), ENGINE_FIX)]
    return []


def _plugins(config: ConfigFile) -> List[Dict[str, str]]:
    enabled = _listed(config.get("plugins", "enabled"))
    lcm = [n for n in enabled if n in PLUGINS]
    if not lcm:
        return []
    keep = [n for n in enabled if n not in PLUGINS] + ([] if PLUGIN in enabled else [PLUGIN])
    return [_row(WARN, "plugins.enabled in %s still lists %s beside %s: its tools (lcm_grep, "
                 "lcm_expand, ...) stay in every request and it keeps writing its store"
                 % (config.path, ", ".join(lcm), PLUGIN),
                 "hermes config set plugins.enabled %s" % shlex.quote(json.dumps(keep)))]


def _settings(env: Mapping[str, str], settings: Any) -> List[Dict[str, str]]:
    ignored = sorted(k for k in env if k.startswith("LCM_") and k not in PATH_VARS)
    rows = []
    threshold = env.get("LCM_CONTEXT_THRESHOLD", "").strip()
    if threshold and not settings.threshold_explicit:
        rows.append(_row(WARN, "LCM_CONTEXT_THRESHOLD=%s was hermes-lcm's trigger; this plugin "
                         "compacts at %g of the window (its own %sTHRESHOLD)"
                         % (threshold[:20], settings.threshold, PREFIX),
                         "hermes config set tencentdb_offload.threshold %s" % shlex.quote(threshold[:20])))
    if ignored:
        rows.append(_row(PASS, "%s: hermes-lcm settings this plugin ignores (keep them only to switch "
                         "back; %s is read only to find the old store)"
                         % (", ".join(ignored[:12]) + (", ..." if len(ignored) > 12 else ""),
                            PATH_VARS[0])))
    return rows


# what hermes-lcm's next open would do; moving lcm.db without its -journal would keep half a write
ROLL_BACK = ("python3 -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute(\"PRAGMA "
             "quick_check\").fetchall()' %s   # rolls the interrupted write back; keep the -journal beside it")


def _store(env: Mapping[str, str], settings: Any) -> List[Dict[str, str]]:
    setting = settings.lcm_history
    if setting == "off":
        found = store_path("auto", env)
        if found is not None and found.is_file():
            return [_row(PASS, "hermes-lcm store %s is not searched (%sLCM_HISTORY=off)" % (found, PREFIX))]
        return []
    history = LcmHistory(store_path(setting, env) or Path())
    if not history.exists():
        if setting != "auto":
            return [_row(WARN, "%sLCM_HISTORY names %s, which is not a file" % (PREFIX, history.path),
                         "set %sLCM_HISTORY to the path of lcm.db, or to auto" % PREFIX)]
        return []
    try:
        n = history.counts()
    except LcmUnavailable as exc:
        fix = ("stop hermes-lcm (see the plugins.enabled row) and restart Hermes" if "locked" in str(exc)
               else ROLL_BACK % shlex.quote(str(history.path)) if "hot journal" in str(exc)
               else "move it aside, or set %sLCM_HISTORY=off to stop searching it" % PREFIX)
        return [_row(WARN, unavailable(str(exc)), fix)]
    return [_row(PASS, "hermes-lcm store %s: %d messages in %d sessions; tdai_offload_search and "
                 "archive search read it read-only (never written)" % (history.path, n["messages"],
                                                                      n["sessions"]))]


def lcm_checks(env: Mapping[str, str], config: ConfigFile, settings: Any, home: Path) -> List[Dict[str, str]]:
    """doctor rows for what hermes-lcm left behind ([] when nothing)."""
    del home        # the store's default place comes from env (HERMES_HOME) like the plugin's
    return _engine(config) + _plugins(config) + _settings(env, settings) + _store(env, settings)
