"""``doctor``: one line per check — pass / warn / fail — with the fix.

Checks the Python version, where the plugin is installed and whether Hermes can see it,
config.yaml (``plugins.enabled`` and ``context.engine``), every setting, the Gateway (health,
version, latency, and an authenticated call that proves the API key and instance id are
accepted), the store directory and the outbox backlog. Hermes is used only if importable,
only to read config.yaml (``hermes_cli.config``); otherwise a stdlib reader does it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .env import effective_env, mini_yaml, offload_block, read_config_yaml, unreadable
from ..config import PREFIX, SPEC, hermes_home, load_settings
from ..engine import NAME

PASS, WARN, FAIL = "pass", "warn", "fail"


class Checks:
    def __init__(self) -> None:
        self.items: List[Dict[str, str]] = []

    def add(self, name: str, status: str, message: str, fix: str = "") -> None:
        self.items.append({"name": name, "status": status, "message": message, "fix": fix})

    @property
    def failed(self) -> bool:
        return any(c["status"] == FAIL for c in self.items)


# --- individual checks ------------------------------------------------------------------

def check_python(c: Checks) -> None:
    v = sys.version_info
    text = "Python %d.%d.%d (%s)" % (v[0], v[1], v[2], sys.executable)
    if (3, 11) <= v[:2] <= (3, 13):
        c.add("python", PASS, text)
    elif v[:2] >= (3, 8):
        c.add("python", WARN, text + ": the plugin runs, but Hermes needs Python 3.11-3.13",
              "run Hermes (and this command) with Python 3.11, 3.12 or 3.13")
    else:
        c.add("python", FAIL, text + " is too old", "use Python 3.11-3.13")


def _manifest(path: Path) -> Dict[str, Any]:
    try:
        data = mini_yaml(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return {}
    return data if isinstance(data, dict) else {}


def check_install(c: Checks, home: Path, plugin_dir: Path) -> None:
    plugins = home / "plugins"
    found: List[Tuple[Path, Dict[str, Any]]] = []
    for pattern in ("*/plugin.yaml", "*/*/plugin.yaml"):
        for yml in sorted(plugins.glob(pattern)) if plugins.is_dir() else []:
            data = _manifest(yml)
            name = str(data.get("name") or yml.parent.name)
            if name == NAME or yml.parent.name == NAME:
                found.append((yml.parent, data))
    here = "running from %s" % plugin_dir
    if not found:
        c.add("install", FAIL, "no %s plugin in %s (%s)" % (NAME, plugins, here),
              "git clone <repo> %s   (or: cp -r %s %s)" % (plugins / NAME, plugin_dir, plugins / NAME))
        return
    where, data = found[0]
    problems = []
    if str(data.get("name") or where.name) != NAME:
        problems.append("plugin.yaml name is %r, not %r" % (data.get("name"), NAME))
    if str(data.get("kind") or "standalone") != "standalone" or "kind" not in data:
        problems.append("plugin.yaml kind is %r; write 'kind: standalone'" % data.get("kind"))
    if not (where / "__init__.py").is_file():
        problems.append("__init__.py missing")
    if where.parent != plugins:
        problems.append("installed one level deeper (%s): Hermes keys it as '%s/%s'"
                        % (where, where.parent.name, where.name))
    if problems:
        c.add("install", FAIL, "%s: %s" % (where, "; ".join(problems)),
              "reinstall: cp -r %s %s" % (plugin_dir, plugins / NAME))
        return
    mine = _manifest(plugin_dir / "plugin.yaml").get("version")
    theirs = data.get("version")
    same = where.resolve() == plugin_dir.resolve()
    if not same and mine and theirs and mine != theirs:
        c.add("install", WARN, "installed %s is version %s, this copy (%s) is %s"
              % (where, theirs, plugin_dir, mine), "update the installed copy")
    else:
        c.add("install", PASS, "installed at %s (version %s)%s"
              % (where, theirs or "?", "" if same else "; " + here))
    if os.environ.get("HERMES_SAFE_MODE", "").strip() in ("1", "true", "yes"):
        c.add("install", WARN, "HERMES_SAFE_MODE is set: Hermes loads no plugins",
              "unset HERMES_SAFE_MODE")


def read_hermes_config(home: Path, env: Mapping[str, str]) -> Tuple[Optional[Dict[str, Any]], str]:
    """config.yaml through Hermes' own reader when importable, else the stdlib reader."""
    if not (home / "config.yaml").exists():
        return None, "none"
    try:
        import hermes_cli.config as hc  # type: ignore   # optional, guarded
    except Exception:
        hc = None
    if hc is not None and str(env.get("HERMES_HOME", "")) == os.environ.get("HERMES_HOME", ""):
        reader = getattr(hc, "read_raw_config", None) or getattr(hc, "load_config", None)
        try:
            data = reader() if reader else None
            if isinstance(data, dict):
                if not data and (home / "config.yaml").read_text(errors="replace").strip():
                    return None, "Hermes could not parse it"
                return data, "hermes_cli.config.%s" % reader.__name__
        except Exception:
            pass
    data, err = read_config_yaml(home)
    return data, "stdlib reader" if data is not None else err


def check_config(c: Checks, home: Path, env: Mapping[str, str]) -> Optional[Dict[str, Any]]:
    path = home / "config.yaml"
    config, how = read_hermes_config(home, env)
    fix_both = "add to %s:  context: {engine: %s}  and  plugins: {enabled: [%s]}" % (path, NAME, NAME)
    if config is None:
        c.add("config", FAIL, "%s: %s" % (path, "missing" if how == "none" else
                                          "unreadable (%s)" % how), fix_both)
        return None
    plugins = config.get("plugins") if isinstance(config.get("plugins"), dict) else {}
    enabled = plugins.get("enabled")
    enabled = [enabled] if isinstance(enabled, str) else (enabled or [])
    disabled = plugins.get("disabled")
    disabled = [disabled] if isinstance(disabled, str) else (disabled or [])
    context = config.get("context") if isinstance(config.get("context"), dict) else {}
    engine = context.get("engine", "compressor")
    if NAME in [str(x) for x in disabled]:
        c.add("config", FAIL, "plugins.disabled lists %s (disabled always wins)" % NAME,
              "remove %s from plugins.disabled in %s" % (NAME, path))
    if NAME in [str(x) for x in enabled]:
        c.add("config", PASS, "plugins.enabled contains %s (read with %s)" % (NAME, how))
    else:
        c.add("config", FAIL, "plugins.enabled in %s does not contain %s (it is %s): Hermes "
              "silently uses its built-in compressor" % (path, NAME, json.dumps(enabled)),
              "hermes plugins enable %s   (or add it to plugins.enabled)" % NAME)
    if engine == NAME:
        c.add("config", PASS, "context.engine is %s" % NAME)
    else:
        c.add("config", FAIL, "context.engine is %r, not %r" % (engine, NAME),
              "set  context: {engine: %s}  in %s" % (NAME, path))
    comp = config.get("compression")
    if isinstance(comp, dict) and comp.get("enabled") is False:
        c.add("config", WARN, "compression.enabled is false: Hermes never asks the engine to compact",
              "remove compression.enabled: false from %s" % path)
    return config


def check_settings(c: Checks, env: Mapping[str, str], block: Optional[Dict[str, Any]]):
    settings, warnings = load_settings(env, block)
    for w in warnings:
        c.add("settings", FAIL, w, "fix or remove it in %s/.env (or the tencentdb_offload: block)"
              % hermes_home(env))
    known = {PREFIX + k for k in SPEC}
    for var in sorted(k for k in env if k.startswith(PREFIX) and k not in known):
        c.add("settings", WARN, "%s is not a setting of this plugin (typo?)" % var,
              "known: " + ", ".join(sorted(known)))
    if not warnings:
        c.add("settings", PASS, "all settings valid: trigger %.0f%%, target %.0f%% of the window, "
              "gateway %s" % (settings.threshold * 100, settings.compact_ratio * 100,
                              settings.gateway_url or "off"))
    if not settings.enabled:
        c.add("settings", WARN, "TENCENTDB_OFFLOAD_ENABLED is false: the engine passes messages "
              "through", "set TENCENTDB_OFFLOAD_ENABLED=true")
    return settings


def check_gateway(c: Checks, settings: Any, timeout: float) -> None:
    from ..memory_gateway.client import GatewayClient, GatewayError, GatewayNotSupported, GatewayRejected
    url = settings.gateway_url
    if not url:
        c.add("gateway", PASS, "off (TENCENTDB_OFFLOAD_GATEWAY_URL=off): local compaction only")
        return
    off_fix = "start the Gateway, fix TENCENTDB_OFFLOAD_GATEWAY_URL, or set it to 'off' for local-only"
    try:
        client = GatewayClient(url, settings.api_key, settings.instance_id,
                               timeout_ms=int(timeout * 1000), ingest_timeout_ms=int(timeout * 1000))
    except ValueError as exc:
        c.add("gateway", FAIL, "%s: %s" % (url, exc), off_fix)
        return
    try:
        started = time.monotonic()
        try:
            health = client.health(force=True, timeout=timeout)
        except GatewayError as exc:
            hint = ""
            if "404" in str(exc) or "not JSON" in str(exc):
                hint = " — no Gateway answers at this URL (check host, port and path)"
            c.add("gateway", FAIL, "GET %s/health failed: %s%s" % (url, exc, hint), off_fix)
            return
        ms = (time.monotonic() - started) * 1000
        c.add("gateway", PASS if ms < 1000 else WARN, "%s is %s, version %s, %.0f ms"
              % (url, health.get("status"), health.get("version") or "?", ms),
              "" if ms < 1000 else "the Gateway answers slowly; compactions may time out")
        try:
            client.query_mmd("tdo-doctor-%s" % uuid.uuid4().hex[:12], limit=1)
            c.add("gateway", PASS, "API key and instance id %r accepted (query-mmd answered)"
                  % settings.instance_id)
        except GatewayNotSupported:
            c.add("gateway", FAIL, "%s has no /v2/offload routes: not an offload V2 Gateway, or a "
                  "wrong path in the URL" % url, "point TENCENTDB_OFFLOAD_GATEWAY_URL at the Gateway root")
        except GatewayRejected as exc:
            if exc.status in (401, 403):
                c.add("gateway", FAIL, "the Gateway refused the credentials (%s)" % exc,
                      "fix TENCENTDB_OFFLOAD_API_KEY / TENCENTDB_OFFLOAD_INSTANCE_ID in %s/.env"
                      % hermes_home(os.environ))
            else:
                c.add("gateway", PASS, "API key and instance id accepted (query-mmd answered %s)" % exc)
        except GatewayError as exc:
            c.add("gateway", FAIL, "authenticated call failed: %s" % exc, off_fix)
    finally:
        client.close()


def check_store(c: Checks, settings: Any, env: Mapping[str, str]) -> None:
    from ..archive.store import Store, StoreError
    directory = settings.resolved_store_dir(env)
    probe = directory
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if directory.is_dir():
        try:
            with tempfile.NamedTemporaryFile(dir=str(directory), prefix=".doctor-"):
                pass
            c.add("store", PASS, "%s is writable" % directory)
        except OSError as exc:
            c.add("store", FAIL, "%s is not writable: %s" % (directory, exc),
                  "fix its permissions or set TENCENTDB_OFFLOAD_STORE_DIR")
            return
    elif directory.exists():
        c.add("store", FAIL, "%s exists and is not a directory" % directory,
              "move it away or set TENCENTDB_OFFLOAD_STORE_DIR")
        return
    elif os.access(str(probe), os.W_OK):
        c.add("store", PASS, "%s will be created on first use (%s is writable)" % (directory, probe))
        return
    else:
        c.add("store", FAIL, "%s cannot be created: %s is not writable" % (directory, probe),
              "set TENCENTDB_OFFLOAD_STORE_DIR to a writable directory")
        return
    if not (directory / "store.db").exists():
        c.add("outbox", PASS, "no store yet (nothing archived so far)")
        return
    problem = unreadable(directory / "store.db")
    if problem:
        c.add("outbox", FAIL, problem, "move the damaged store.db aside (or let the plugin do it)")
        return
    try:
        store = Store(directory)
        try:
            st = store.stats()
        finally:
            store.close()
    except (StoreError, Exception) as exc:  # a broken database is a finding, not a crash
        c.add("outbox", FAIL, "cannot read %s: %s" % (directory / "store.db", exc),
              "move the damaged store.db aside; the plugin starts a new one")
        return
    msg = "%d rows waiting, %d refused for good, %d delivered; %d items archived" % (
        st["outbox_backlog"], st["outbox_dead"], st["delivered"], st["archived_items"])
    if st["outbox_dead"]:
        c.add("outbox", WARN, msg, "the Gateway refused rows for good; see `status` for the errors")
    elif st["outbox_backlog"] and not settings.gateway_url:
        c.add("outbox", WARN, msg + " but the Gateway is off",
              "set TENCENTDB_OFFLOAD_GATEWAY_URL to deliver them (or ignore: the archive has them)")
    elif st["outbox_backlog"] > 200:
        c.add("outbox", WARN, msg, "the Gateway is not keeping up or was down; check `status`")
    else:
        c.add("outbox", PASS, msg)


def check_hermes(c: Checks) -> None:
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            v = version("hermes-agent")
        except PackageNotFoundError:
            c.add("hermes", PASS, "hermes-agent is not installed for this Python (fine when Hermes "
                  "has its own environment)")
            return
    except Exception:
        return
    parts = tuple(int(p) if p.isdigit() else 0 for p in v.split(".")[:3])
    if (0, 17, 0) <= parts <= (0, 19, 99):
        c.add("hermes", PASS, "hermes-agent %s (supported: 0.17-0.19)" % v)
    else:
        c.add("hermes", WARN, "hermes-agent %s: tested with 0.17.0-0.19.0" % v,
              "report problems with this version")


# --- the command ------------------------------------------------------------------------

def run_checks(plugin_dir: Path, timeout: float) -> Checks:
    c = Checks()
    env = effective_env()
    home = hermes_home(env)
    check_python(c)
    check_hermes(c)
    check_install(c, home, plugin_dir)
    config = check_config(c, home, env)
    settings = check_settings(c, env, offload_block(config))
    check_gateway(c, settings, timeout)
    check_store(c, settings, env)
    return c


def cmd_doctor(args: argparse.Namespace) -> int:
    checks = run_checks(Path(args.plugin_dir), max(0.2, args.timeout))
    if args.json:
        print(json.dumps({"ok": not checks.failed, "hermes_home": str(hermes_home(effective_env())),
                          "checks": checks.items}, ensure_ascii=False, indent=2))
    else:
        for item in checks.items:
            line = "%-4s  %-8s %s" % (item["status"], item["name"], item["message"])
            if item["fix"] and item["status"] != PASS:
                line += "  — fix: " + item["fix"]
            print(line)
        bad = [i for i in checks.items if i["status"] == FAIL]
        print("\n%s" % ("all checks passed" if not bad else "%d check(s) failed" % len(bad)))
    if checks.failed:
        first = next(i for i in checks.items if i["status"] == FAIL)
        sys.stderr.write("tencentdb-offload doctor: %d check(s) failed, first: %s: %s\n"
                         % (sum(1 for i in checks.items if i["status"] == FAIL), first["name"],
                            first["message"]))
        return 1
    return 0
