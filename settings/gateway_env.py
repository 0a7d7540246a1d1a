"""Which Gateway URL, API key and instance id the environment names, and which variable said so.

TencentDB's own Hermes plugins read other variables for the same Gateway: its minimal context
engine reads ``TDAI_MEMORY_ENDPOINT`` / ``_API_KEY`` / ``_SERVICE_ID``; its memory provider
``memory_tencentdb`` reads ``MEMORY_TENCENTDB_GATEWAY_HOST`` / ``_PORT`` and
``MEMORY_TENCENTDB_GATEWAY_API_KEY`` (else ``TDAI_GATEWAY_API_KEY``). They are accepted as
fallbacks so one Gateway is configured once; ours (``TENCENTDB_OFFLOAD_*``) always win.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

OURS = "TENCENTDB_OFFLOAD_"
PROVIDER_HOST = "MEMORY_TENCENTDB_GATEWAY_HOST"
PROVIDER_PORT = "MEMORY_TENCENTDB_GATEWAY_PORT"
PROVIDER_KEYS = ("MEMORY_TENCENTDB_GATEWAY_API_KEY", "TDAI_GATEWAY_API_KEY")   # its own order
PROVIDER_DEFAULTS = ("127.0.0.1", 8420)   # what memory_tencentdb uses when neither is set

# setting (suffix of ours) -> their variables, most specific first
FALLBACKS: Dict[str, Tuple[str, ...]] = {
    "GATEWAY_URL": ("TDAI_MEMORY_ENDPOINT", PROVIDER_HOST, PROVIDER_PORT),
    "API_KEY": ("TDAI_MEMORY_API_KEY",) + PROVIDER_KEYS,
    "INSTANCE_ID": ("TDAI_MEMORY_SERVICE_ID",),
}


@dataclass(frozen=True)
class Found:
    value: str
    source: str          # the variable(s) the value came from, e.g. "MEMORY_TENCENTDB_GATEWAY_HOST/_PORT"
    fallback: bool       # True when it came from one of TencentDB's variables, not ours


def provider_port(env: Mapping[str, str]) -> int:
    """The port memory_tencentdb connects to: its variable when a valid port, else 8420 (as it does)."""
    raw = (env.get(PROVIDER_PORT) or "").strip()
    try:
        port = int(raw)
    except ValueError:
        return PROVIDER_DEFAULTS[1]
    return port if 1 <= port <= 65535 else PROVIDER_DEFAULTS[1]


def provider_url(env: Mapping[str, str]) -> str:
    """The base URL memory_tencentdb builds from its host/port variables (defaults included)."""
    host = (env.get(PROVIDER_HOST) or "").strip() or PROVIDER_DEFAULTS[0]
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host            # an IPv6 literal needs brackets in a URL
    return "http://%s:%d" % (host, provider_port(env))


def provider_key(env: Mapping[str, str]) -> Optional[str]:
    """The Bearer key memory_tencentdb sends (None: it sends ``local``)."""
    for var in PROVIDER_KEYS:
        value = (env.get(var) or "").strip()
        if value:
            return value
    return None


def _theirs(suffix: str, env: Mapping[str, str]) -> Optional[Found]:
    for var in FALLBACKS[suffix]:
        value = (env.get(var) or "").strip()
        if not value:
            continue
        if var in (PROVIDER_HOST, PROVIDER_PORT):
            both = bool((env.get(PROVIDER_HOST) or "").strip() and (env.get(PROVIDER_PORT) or "").strip())
            return Found(provider_url(env), PROVIDER_HOST + "/_PORT" if both else var, True)
        return Found(value, var, True)
    return None


def resolve(env: Mapping[str, str]) -> Dict[str, Found]:
    """``{"GATEWAY_URL"|"API_KEY"|"INSTANCE_ID": Found}`` for each one some variable sets.

    Our variable, when present (even empty: ``off`` and friends are ours to interpret), wins;
    else the first of TencentDB's that holds a non-blank value. Absent keys: nothing set it.
    """
    out: Dict[str, Found] = {}
    for suffix in FALLBACKS:
        if OURS + suffix in env:
            out[suffix] = Found(env[OURS + suffix], OURS + suffix, False)
            continue
        found = _theirs(suffix, env)
        if found is not None:
            out[suffix] = found
    return out


def sources_line(env: Mapping[str, str], block: Optional[Mapping[str, object]] = None) -> str:
    """For status and doctor: ``"URL from X, key from Y, instance from Z"`` in the order
    ``load_settings`` applies (our variable, then the ``tencentdb_offload:`` block, then TencentDB's)."""
    found, block = resolve(env), block if isinstance(block, Mapping) else {}
    words = {"GATEWAY_URL": "URL", "API_KEY": "key", "INSTANCE_ID": "instance"}
    out = []
    for suffix, word in words.items():
        hit = found.get(suffix)
        if hit is not None and not hit.fallback:
            where = hit.source
        elif suffix.lower() in block:
            where = "tencentdb_offload.%s" % suffix.lower()
        else:
            where = hit.source if hit is not None else "the default"
        out.append("%s from %s" % (word, where))
    return ", ".join(out)
