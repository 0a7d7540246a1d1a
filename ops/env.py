"""What the operator commands share: the environment Hermes would give the plugin
(process env + ``$HERMES_HOME/.env``), config.yaml (``hermes_config``), settings,
``CliError`` (read-only SQLite is ``archive.readonly``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

from ..config import Settings, load_settings
from ..hermes_config import ConfigFile, hermes_home, read_config


PROG = "python3 <plugin dir>"
MIN_WINDOW = 64_000          # Hermes refuses a smaller context window


class CliError(Exception):
    """A failure the user can act on; printed as one line, exit status 1."""


# --- environment and .env (stdlib only) ------------------------------------

def read_dotenv(path: Path) -> Dict[str, str]:
    """``KEY=VALUE`` lines of a .env file (``export``, quotes and comments understood)."""
    out: Dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        if line.startswith("export "):
            line = line[7:].lstrip()
        key, _, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        elif " #" in value:
            value = value.split(" #", 1)[0].rstrip()
        if key:
            out[key] = value
    return out


def effective_env(base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment Hermes would give the plugin: ``$HERMES_HOME/.env`` wins (override)."""
    env = dict(os.environ if base is None else base)
    env.update(read_dotenv(hermes_home(env) / ".env"))
    return env


def resolve_settings(overrides: Optional[Mapping[str, str]] = None
                     ) -> Tuple[Dict[str, str], ConfigFile, Settings, List[str]]:
    """(env, config.yaml, settings, warnings) as the plugin would see them in Hermes."""
    env = effective_env()
    env.update(overrides or {})
    config = read_config(hermes_home(env))
    settings, warnings = load_settings(env, config.block())
    return env, config, settings, warnings
