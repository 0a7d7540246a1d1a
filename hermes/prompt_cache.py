"""The prompt-cache TTL Hermes asks the provider for: ``prompt_caching.cache_ttl`` in config.yaml.

Hermes 0.22 reads it when an agent starts (``agent/agent_init.py``): ``5m`` (its default) or
``1h`` as written; ``auto`` is ``1h`` where a person paces the session (the CLI, the messaging
platforms) and ``5m`` where a machine does (sub-agents, cron, one-shot, webhooks); ``off``,
``false``, ``disabled``, ``no`` or ``none`` turn caching off; any other value keeps ``5m``.
Idle compaction (``compaction.idle``) follows it unless ``TENCENTDB_OFFLOAD_CACHE_TTL_S`` is
set: with ``1h``, compacting after every 5-minute pause would rewrite a cache still warm.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Optional, Tuple

KEY = "prompt_caching.cache_ttl"
VAR = "TENCENTDB_OFFLOAD_CACHE_TTL_S"
TIERS = {"5m": 300, "1h": 3_600}
AUTO = "auto"
DISABLED = ("off", "false", "disabled", "no", "none")


def host_ttl(config: Any) -> Optional[Tuple[int, str]]:
    """(seconds, where from) that ``config`` (a ``ConfigFile``) sets, None when it sets none.
    0 seconds: Hermes caches nothing, so no pause makes a cache cold (no idle compaction)."""
    raw = config.get("prompt_caching", "cache_ttl") if config is not None else None
    if raw is None and not _section_says_none(config):
        return None
    where = "%s: %s in config.yaml" % (KEY, _shown(raw))
    if raw in TIERS:
        return TIERS[raw], where
    if raw == AUTO:             # the plugin serves the sessions a person paces: 1h there
        return TIERS["1h"], where + " (1h where a person paces the session)"
    if raw is False or raw is None or str(raw).strip().lower() in DISABLED:
        return 0, where + " (Hermes caches nothing: no idle compaction)"
    return TIERS["5m"], where + " (Hermes keeps 5m for a value it does not know)"


def _section_says_none(config: Any) -> bool:
    """``cache_ttl: null`` (or empty) written under ``prompt_caching:`` turns caching off."""
    section = config.get("prompt_caching") if config is not None else None
    return isinstance(section, Mapping) and "cache_ttl" in section


def _shown(raw: Any) -> str:
    return "null" if raw is None else str(raw).lower() if isinstance(raw, bool) else str(raw)[:20]


def with_host_ttl(settings: Any, config: Any, env: Mapping[str, str]) -> Any:
    """``settings`` with the TTL applied and where it came from: ``CACHE_TTL_S`` where it is
    set (the environment, then the ``tencentdb_offload:`` block), else the host's."""
    block = config.block() if config is not None else None
    if VAR in env:
        return replace(settings, cache_ttl_from=VAR)
    if isinstance(block, Mapping) and block.get("cache_ttl_s") is not None:
        return replace(settings, cache_ttl_from="tencentdb_offload.cache_ttl_s")
    found = host_ttl(config)
    if found is None:
        return replace(settings, cache_ttl_s=TIERS["5m"], cache_ttl_from="%s not set: Hermes' 5m" % KEY)
    return replace(settings, cache_ttl_s=found[0], cache_ttl_from=found[1])
