"""doctor's checks for running beside TencentDB's memory provider ``memory_tencentdb``: rows that
say where the two plugins would disagree about the one Gateway they share.

Both talk to one Gateway, configured in two shapes (see ``settings/gateway_env``). Each row is a dict in
the shape ``doctor.Checks.add`` builds (name, status, message, fix); no rows when the provider
is neither installed, enabled, selected nor configured. Secrets are never shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping
from urllib.parse import urlsplit

from ..settings.gateway_env import (PROVIDER_HOST, PROVIDER_KEYS, PROVIDER_PORT, provider_key, provider_port, provider_url,
                           sources_line)
from ..hermes.config import ConfigFile

PROVIDER = "memory_tencentdb"
ALIASES = ("memory-tencentdb", "tdai")          # accepted only by a Hermes checkout that bundles it
NAME, WARN, PASS = "memory", "warn", "pass"
INSTALL_FIX = "cp -r <memory_tencentdb checkout dir> $HERMES_HOME/plugins/memory_tencentdb"
SELECT_FIX = "hermes config set memory.provider memory_tencentdb"
CMD_VAR = "MEMORY_TENCENTDB_GATEWAY_CMD"
# where its supervisor looks for a Gateway to start when CMD_VAR is unset (under $HOME)
DISCOVERED = (".memory-tencentdb/tdai-memory-openclaw-plugin", "tdai-memory-openclaw-plugin",
              ".hermes/plugins/tdai-memory-openclaw-plugin")


def _row(status: str, message: str, fix: str = "") -> Dict[str, str]:
    return {"name": NAME, "status": status, "message": message, "fix": fix}


def _listed(value: Any) -> List[str]:
    return [str(v) for v in value] if isinstance(value, list) else [value] if isinstance(value, str) else []


def installed_at(home: Path) -> Dict[str, bool]:
    """Where memory_tencentdb is found: the dir a pip-installed Hermes reads, and its installer's."""
    return {"user": (home / "plugins" / PROVIDER / "__init__.py").is_file(),
            "installer": (home / "hermes-agent" / "plugins" / "memory" / PROVIDER / "__init__.py").is_file()}


def _in_use(env: Mapping[str, str], config: ConfigFile, where: Dict[str, bool]) -> bool:
    names = {PROVIDER, *ALIASES}
    configured = any(env.get(v) for v in (PROVIDER_HOST, PROVIDER_PORT, CMD_VAR) + PROVIDER_KEYS)
    return bool(names & set(_listed(config.get("plugins", "enabled")))) or \
        config.get("memory", "provider") in names or where["user"] or where["installer"] or configured


def _selection(config: ConfigFile, where: Dict[str, bool], home: Path) -> List[Dict[str, str]]:
    selected = config.get("memory", "provider")
    if selected in ALIASES:
        return [_row(WARN, "memory.provider is %r: a pip-installed Hermes loads a provider by its directory "
                     "name only, so memory_tencentdb never runs" % selected, SELECT_FIX)]
    if selected != PROVIDER:
        return [_row(WARN, "memory_tencentdb is installed or enabled but memory.provider is %r: Hermes "
                     "activates a memory provider only through memory.provider (plugins.enabled does "
                     "not)" % (selected or ""), SELECT_FIX)]
    if not where["user"]:
        extra = (" (its installer linked it under %s, where a pip-installed Hermes does not look)"
                 % (home / "hermes-agent" / "plugins" / "memory")) if where["installer"] else ""
        return [_row(WARN, "memory.provider is memory_tencentdb but %s has no memory_tencentdb%s"
                     % (home / "plugins", extra), INSTALL_FIX)]
    return [_row(PASS, "memory.provider is memory_tencentdb (installed in %s)" % (home / "plugins"))]


def _same_gateway(env: Mapping[str, str], settings: Any) -> List[Dict[str, str]]:
    if not settings.gateway_url:
        return []
    ours, theirs = urlsplit(settings.gateway_url), urlsplit(provider_url(env))
    ours_port = ours.port or (443 if ours.scheme == "https" else 80)
    if (ours.scheme, (ours.hostname or "").lower(), ours_port) != ("http", theirs.hostname, provider_port(env)) \
            or ours.path.strip("/"):
        return [_row(WARN, "memory_tencentdb talks to %s (%s/_PORT) but this plugin to %s: they use two "
                     "different Gateways" % (provider_url(env), PROVIDER_HOST, settings.public()["gateway_url"]),
                     "set one: unset TENCENTDB_OFFLOAD_GATEWAY_URL (it falls back to %s/_PORT) or make "
                     "both name the same host and port" % PROVIDER_HOST)]
    return []


def _same_key(env: Mapping[str, str], settings: Any) -> List[Dict[str, str]]:
    theirs = provider_key(env)
    if (theirs or "local") == settings.api_key:
        return []
    if theirs is None or settings.api_key == "local":
        who = "this plugin only" if theirs is None else "memory_tencentdb only (%s)" % " or ".join(PROVIDER_KEYS)
        message = "a Gateway API key is set for %s: a Gateway that checks keys refuses the other" % who
    else:
        message = "memory_tencentdb and this plugin send different Gateway API keys: one is refused"
    return [_row(WARN, message, "set the key once in %s and unset TENCENTDB_OFFLOAD_API_KEY "
                 "(it falls back to it)" % PROVIDER_KEYS[0])]


def _same_instance(settings: Any) -> List[Dict[str, str]]:
    if settings.instance_id == "default":
        return []
    return [_row(WARN, "memory_tencentdb always sends service id 'default' but this plugin sends instance "
                 "id %r: the two plugins' data land in different Gateway instances"
                 % settings.public()["instance_id"], "unset TENCENTDB_OFFLOAD_INSTANCE_ID (and "
                 "TDAI_MEMORY_SERVICE_ID) to share the 'default' instance")]


def _supervisor(env: Mapping[str, str]) -> List[Dict[str, str]]:
    if env.get(CMD_VAR, "").strip():
        why = "%s is set" % CMD_VAR
    else:
        root = Path(env.get("HOME") or env.get("USERPROFILE") or "~").expanduser()
        found = [root / d for d in DISCOVERED if (root / d / "src" / "gateway" / "server.ts").is_file()]
        if not found:
            return []
        why = "memory_tencentdb will discover a Gateway to start in %s" % found[0]
    return [_row(WARN, "%s: its supervisor may start a Gateway per chat process and stop it when that chat "
                 "ends, so this plugin's Gateway then exists only while a memory-enabled chat runs" % why,
                 "run one long-lived Gateway yourself and unset %s" % CMD_VAR)]


def memory_checks(env: Mapping[str, str], config: ConfigFile, settings: Any, home: Path) -> List[Dict[str, str]]:
    """doctor rows for memory_tencentdb beside this plugin ([] when it is not in use)."""
    where = installed_at(home)
    if not _in_use(env, config, where):
        return []
    sources = _row(PASS, "this plugin's Gateway settings: %s" % sources_line(env, config.block()))
    return (_selection(config, where, home) + [sources] + _same_gateway(env, settings)
            + _same_key(env, settings) + _same_instance(settings) + _supervisor(env))
