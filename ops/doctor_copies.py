"""Doctor: which copy Hermes loads when several plugin folders claim this plugin's name, and
whether the copy running doctor is another Hermes home's.

Hermes scans its user plugins folder in sorted order, then ``./.hermes/plugins`` when
``HERMES_ENABLE_PROJECT_PLUGINS`` is on, and the *last* manifest of a name wins: a backup
such as ``tencentdb-offload.bak`` sorts after ``tencentdb-offload`` and is the copy it loads.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from ..engine import NAME
from ..hermes.config import mini_yaml

PASS, WARN, FAIL = "pass", "warn", "fail"
TRUTHY = ("1", "true", "yes", "on")         # Hermes' own truthy words for an env switch


def manifest(path: Path) -> Dict[str, Any]:
    try:
        data = mini_yaml(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}
    return data if isinstance(data, dict) else {}


def copies(plugins: Path) -> List[Path]:
    """Top-level folders of ``plugins`` whose manifest's name (or folder name) is ours, in
    Hermes' scan order."""
    try:
        children = sorted(plugins.iterdir()) if plugins.is_dir() else []
    except OSError:
        return []
    out = []
    for child in children:
        yml = next((f for f in (child / "plugin.yaml", child / "plugin.yml") if f.is_file()), None)
        if yml is not None and str(manifest(yml).get("name") or child.name) == NAME:
            out.append(child)
    return out


def check_copies(c: Any, plugins: Path, env: Mapping[str, str], cwd: Path) -> bool:
    """Say which copy Hermes loads when there are several; True when it is not
    ``plugins/<NAME>`` (a fail: the install check has nothing more to say)."""
    every = copies(plugins)
    project = str(env.get("HERMES_ENABLE_PROJECT_PLUGINS", "")).strip().lower() in TRUTHY
    if project:
        every += copies(cwd / ".hermes" / "plugins")
    if len(every) < 2:
        return False
    loaded, mine = every[-1], plugins / NAME
    keep = mine if mine in every else loaded
    fix = " && ".join("mv %s %s" % (shlex.quote(str(p)), shlex.quote(str(p.parent.parent / (p.name + ".unused"))))
                      for p in every if p != keep)
    names = ", ".join(str(p) for p in every)
    version = manifest(loaded / "plugin.yaml").get("version") or "?"
    if loaded == keep:
        c.add("install", WARN, "%d folders are named %s (%s); Hermes loads the last, %s, and "
              "ignores the others" % (len(every), NAME, names, loaded), fix)
        return False
    c.add("install", FAIL, "%d folders are named %s (%s); Hermes loads the last one, %s "
          "(version %s), not %s%s" % (len(every), NAME, names, loaded, version, mine,
                                      " (HERMES_ENABLE_PROJECT_PLUGINS is on)" if project else ""), fix)
    return True


HOME_FILES = ("config.yaml", ".env", "state.db")     # what makes a folder a Hermes home


def home_of(plugin_dir: Path) -> Optional[Path]:
    """The Hermes home whose ``plugins/`` folder holds ``plugin_dir``, when it is one (a
    clone elsewhere, or a project's ``.hermes/plugins``, belongs to none)."""
    parent = plugin_dir.resolve().parent
    if parent.name != "plugins":
        return None
    home = parent.parent
    return home if any((home / name).exists() for name in HOME_FILES) else None


def check_copy_home(c: Any, env: Mapping[str, str], home: Path, plugin_dir: Path) -> None:
    """A copy installed in another home checks this one (``HERMES_HOME`` decides, not where
    the copy is): say so, with the command that checks its own home."""
    own = home_of(plugin_dir)
    if own is None or own == home.resolve():
        return
    why = ("HERMES_HOME=%s" % env["HERMES_HOME"].strip() if env.get("HERMES_HOME", "").strip()
           else "HERMES_HOME is not set")
    c.add("home", WARN, "this copy of the plugin (%s) is the one the Hermes home %s loads, not the "
          "one %s loads: doctor checked %s (%s), with this copy's code"
          % (plugin_dir, own, home, home, why),
          "HERMES_HOME=%s python3 %s doctor   # to check the home this copy belongs to"
          % (shlex.quote(str(own)), shlex.quote(str(plugin_dir))))
