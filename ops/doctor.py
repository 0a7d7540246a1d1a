"""``doctor``: one line per check — pass / warn / fail — and, for each problem, a command
that fixes it.

Checks the Python version, the Hermes on PATH, where the plugin is installed and whether
Hermes can see it, config.yaml (``plugins.enabled`` and ``context.engine``), every setting
(naming the file it came from, suggesting the right name for a misspelt one), the Gateway
(health, version, latency, and an authenticated call that proves the API key and instance id
are accepted), the store directory and the outbox backlog. Writes nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple

from ..settings.config import GATEWAY_OFF, PREFIX, SPEC, Settings
from ..engine import NAME
from ..hermes.config import ConfigFile, hermes_home, read_config
from ..hermes.releases import of_release
from ..common.humanize import count, plural, printable
from .doctor_copies import check_copies, check_copy_home, manifest as _manifest
from .doctor_memory import memory_checks
from .doctor_secrets import secret_checks
from .doctor_lcm import PLUGINS as LCM_PLUGINS, lcm_checks
from .doctor_store import check_store
from .env import compression_findings, effective_env, ignored_proxy
from .gateway_path import wrong_path
from .hermes_probe import check_hermes
from .settings_check import CREDENTIAL_PLACEHOLDERS, check_settings
from .settings_source import overridden, source_of
from .status import configured_window

if TYPE_CHECKING:     # imported where used: doctor runs without a Gateway client loaded
    from ..memory_gateway.client import GatewayClient


PASS, WARN, FAIL = "pass", "warn", "fail"


class Checks:
    def __init__(self) -> None:
        self.items: List[Dict[str, str]] = []

    def add(self, name: str, status: str, message: str, fix: str = "") -> None:
        # a Gateway's version or error text is a peer's: never a terminal control in our output
        self.items.append({"name": name, "status": status, "message": printable(message, newlines=False),
                           "fix": printable(fix, newlines=False)})

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


def install_url(plugin_dir: Path) -> str:
    """The URL this copy came from (its git remote), else its ``file://`` URL."""
    try:
        text = (plugin_dir / ".git" / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return plugin_dir.resolve().as_uri()
    section = ""
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line
        elif section == '[remote "origin"]' and line.startswith("url"):
            return _as_url(line.partition("=")[2].strip(), plugin_dir)
    return plugin_dir.resolve().as_uri()


def _as_url(remote: str, plugin_dir: Path) -> str:
    """A clone of a local folder has a path as its remote: ``hermes plugins install`` takes
    URLs, so give it the ``file://`` form (``git@host:repo`` and ``https://`` stay as they are)."""
    if "://" in remote or (":" in remote.split("/")[0] and not remote.startswith("/")):
        return remote
    return (plugin_dir / remote).resolve().as_uri()


def check_install(c: Checks, home: Path, plugin_dir: Path, version: Optional[Tuple[int, ...]] = None) -> None:
    plugins = home / "plugins"
    found: List[Tuple[Path, Dict[str, Any]]] = []
    for pattern in ("*/plugin.yaml", "*/*/plugin.yaml"):
        for yml in sorted(plugins.glob(pattern)) if plugins.is_dir() else []:
            data = _manifest(yml)
            name = str(data.get("name") or yml.parent.name)
            if name == NAME or yml.parent.name == NAME:
                found.append((yml.parent, data))
    install = "hermes plugins install %s --enable" % shlex.quote(install_url(plugin_dir))
    release = of_release(version)
    if release is not None and release.plugin_commands_need_network:
        install += "   # without network: git clone %s %s && hermes config set plugins.enabled " \
                   "'[\"%s\"]' (list your other plugins too)" % (
                       shlex.quote(install_url(plugin_dir)), shlex.quote(str(plugins / NAME)), NAME)
    if not found:
        c.add("install", FAIL, "no %s plugin in %s (this copy runs from %s)" % (NAME, plugins, plugin_dir),
              install)
        return
    if check_copies(c, plugins, os.environ, Path.cwd()):     # Hermes loads another copy
        return
    where, data = found[0]
    problems = []
    if str(data.get("name") or where.name) != NAME:
        problems.append("plugin.yaml name is %r, not %r" % (data.get("name"), NAME))
    if str(data.get("kind") or "standalone") != "standalone" or "kind" not in data:
        problems.append("plugin.yaml kind is %r, not 'standalone'" % data.get("kind"))
    if not (where / "__init__.py").is_file():
        problems.append("__init__.py missing")
    if where.parent != plugins:
        problems.append("installed one level deeper (%s): Hermes keys it as '%s/%s'"
                        % (where, where.parent.name, where.name))
    if problems:
        c.add("install", FAIL, "%s: %s" % (where, "; ".join(problems)),
              "rm -rf %s && %s" % (shlex.quote(str(where)), install))
        return
    mine = _manifest(plugin_dir / "plugin.yaml").get("version")
    theirs = data.get("version")
    same = where.resolve() == plugin_dir.resolve()
    if not same and mine and theirs and mine != theirs:
        c.add("install", WARN, "installed %s is version %s, this copy (%s) is %s"
              % (where, theirs, plugin_dir, mine), "git -C %s pull" % shlex.quote(str(where))
              if (where / ".git").exists() else "hermes plugins update %s" % NAME)
    else:
        c.add("install", PASS, "installed at %s (version %s)%s"
              % (where, theirs or "?", "" if same else "; this copy runs from %s" % plugin_dir))
    if os.environ.get("HERMES_SAFE_MODE", "").strip() in ("1", "true", "yes"):
        c.add("install", WARN, "HERMES_SAFE_MODE is set: Hermes loads no plugins",
              "unset HERMES_SAFE_MODE")


ENGINE_FIX = "hermes config set context.engine %s" % NAME


def _names(value: Any) -> List[str]:
    """A list of plugin names as Hermes reads it: a list's strings; a bare string is no list
    to Hermes (no release reads anything from it), never str() a structure."""
    return [x for x in value if isinstance(x, str)] if isinstance(value, list) else []


def _shown(value: Any) -> str:
    return ("the text %s, not a list" % json.dumps(value) if isinstance(value, str)
            else json.dumps(_names(value)))


def _list_fix(key: str, names: List[str]) -> str:
    return "hermes config set plugins.%s %s" % (key, shlex.quote(json.dumps(names)))


def _unread_fix(config: ConfigFile, enable_fix: str) -> str:
    """The fix for a config.yaml that exists but was not read: its cause, not always the YAML."""
    path = shlex.quote(str(config.path))
    if "Permission denied" in config.error:
        return "chmod u+r %s   # as its owner: Hermes runs as you" % path
    if config.path.is_dir():
        return "mv %s %s && %s && %s" % (path, shlex.quote("%s.moved" % config.path), ENGINE_FIX,
                                        enable_fix)
    return ("fix the YAML in %s (or move it aside: mv %s %s && %s && %s)"
            % (path, path, shlex.quote("%s.broken" % config.path), ENGINE_FIX, enable_fix))


def check_home(c: Checks, env: Mapping[str, str], home: Path) -> bool:
    """Which home is checked and why (a copy of the plugin run from elsewhere checks this one,
    not its own); one that does not exist explains every missing file below: said first."""
    if home.is_dir():
        raw = env.get("HERMES_HOME", "").strip()
        c.add("home", PASS, "checking the Hermes home %s (%s)" % (
            home, "HERMES_HOME=%s" % raw if raw else "HERMES_HOME is not set: Hermes' default"))
        return True
    if env.get("HERMES_HOME"):
        c.add("home", FAIL, "HERMES_HOME=%s %s: Hermes has no profile there, which is why the "
              "plugin, config.yaml and .env below are missing"
              % (home, "is not a directory" if home.exists() else "does not exist"),
              "unset HERMES_HOME   # or export HERMES_HOME=DIR, the directory of your Hermes profile")
    else:
        c.add("home", FAIL, "%s does not exist: Hermes has not run as this user yet, which is why "
              "the plugin, config.yaml and .env below are missing" % home,
              "hermes setup   # creates %s" % shlex.quote(str(home)))
    return False


def check_config(c: Checks, config: ConfigFile, version: Optional[Tuple[int, ...]] = None) -> None:
    """Where ``hermes plugins enable/disable`` refuse without network (the package manager of
    a ``version`` whose plugin commands need it downloads a Python first), the fixes are
    ``hermes config set`` commands."""
    path = config.path
    release = of_release(version)
    offline = release is not None and release.plugin_commands_need_network
    unlisted = release is not None and release.loads_engine_unlisted
    enabled, shown = _names(config.get("plugins", "enabled")), _shown(config.get("plugins", "enabled"))
    disabled = _names(config.get("plugins", "disabled"))
    # hermes-lcm left out: its own row says to drop it, one fix must not put it back
    enable_fix = _list_fix("enabled", [n for n in enabled if n not in LCM_PLUGINS] + [NAME]) \
        if offline else "hermes plugins enable %s" % NAME
    if config.data is None:
        if config.error == "missing":
            c.add("config", FAIL, "%s does not exist" % path, "%s && %s" % (ENGINE_FIX, enable_fix))
        else:
            c.add("config", FAIL, "%s: %s" % (path, config.error), _unread_fix(config, enable_fix))
        return
    engine = config.get("context", "engine") or "compressor"
    if NAME in disabled:
        c.add("config", FAIL, "plugins.disabled in %s lists %s (disabled always wins)" % (path, NAME),
              _list_fix("disabled", [n for n in disabled if n != NAME]) if offline else enable_fix)
    if NAME in enabled:
        c.add("config", PASS, "plugins.enabled contains %s (%s read with %s)" % (NAME, path, config.reader))
    elif unlisted and engine == NAME:
        c.add("config", FAIL, "plugins.enabled in %s does not contain %s (it is %s): this Hermes "
              "still loads the engine named by context.engine, but not the plugin's hooks and "
              "tools: tool results are not archived as they arrive, nothing reaches the Gateway, "
              "and the model has no tdai_* recall tools" % (path, NAME, shown), enable_fix)
    else:
        c.add("config", FAIL, "plugins.enabled in %s does not contain %s (it is %s): Hermes "
              "silently uses its built-in compressor" % (path, NAME, shown), enable_fix)
    if engine == NAME:
        c.add("config", PASS, "context.engine is %s" % NAME)
    else:
        c.add("config", FAIL, "context.engine in %s is %r, not %r" % (path, engine, NAME), ENGINE_FIX)
    off, ignored = compression_findings(config)
    if off:
        c.add("config", FAIL, "compression.enabled is false in %s: Hermes never calls the engine, "
              "so nothing is compacted and the context grows past the window" % path,
              "hermes config set compression.enabled true")
    if ignored:
        c.add("config", WARN, "%s in %s: Hermes' built-in compressor reads %s, this plugin does "
              "not (it honours none of compression.* except what Hermes itself applies: enabled, "
              "timeouts, hygiene limits)" % (", ".join(ignored), path, "it" if len(ignored) == 1 else "them"),
              "remove %s from config.yaml, and set the plugin's own setting where one is named"
              % ("it" if len(ignored) == 1 else "them"))


DEFAULT_KEY = ("the default key 'local' is a placeholder: a Gateway without server.apiKey "
               "accepts any key, one with a key wants it in %sAPI_KEY" % PREFIX)


def _settings_line(c: Checks, suffix: str) -> Tuple[str, str]:
    """(the name as the settings check wrote it, its fix) for an invalid ``suffix``: one
    problem, one fix, wherever the value came from (.env, environment, config.yaml block)."""
    for i in reversed(c.items):
        name = i["message"].partition("=")[0]
        if i["name"] == "settings" and name in (PREFIX + suffix, SPEC[suffix][0]) and i["fix"]:
            return (name if name.startswith(PREFIX) else "tencentdb_offload." + name), i["fix"]
    return PREFIX + suffix, ""


def check_gateway(c: Checks, settings: Settings, timeout: float, invalid: str,
                  set_url: Callable[[str], str], set_credentials: str, off_by: str = "GATEWAY_URL",
                  env: Optional[Mapping[str, str]] = None) -> None:
    """``invalid``: why the setting ``off_by`` (the URL, or a credential that cannot be sent)
    turned the Gateway off ("" when nothing did): then nothing is contacted. A configured
    Gateway that cannot be reached is a failure; the default URL with nothing behind it
    means local-only, and with something behind it a warning: nobody chose that Gateway."""
    from ..memory_gateway.client import GatewayClient, GatewayError, GatewayUnavailable
    var = PREFIX + "GATEWAY_URL"
    if invalid:
        name, fix = _settings_line(c, off_by)
        c.add("gateway", WARN, "Gateway off: %s is invalid (%s); nothing contacted" % (name, invalid),
              fix or (set_url("off") if off_by == "GATEWAY_URL" else set_credentials))
        return
    url = settings.gateway_url
    if not url:
        c.add("gateway", PASS, "off (%s=off): local compaction only" % var)
        return
    client = GatewayClient(url, settings.api_key, settings.instance_id,
                           timeout_ms=int(timeout * 1000), ingest_timeout_ms=int(timeout * 1000))
    try:
        started = time.monotonic()
        try:
            health = client.health(force=True, timeout=timeout)
        except GatewayUnavailable as exc:
            if settings.gateway_configured:
                reason = str(exc) if str(exc).startswith("cannot reach") else \
                    "cannot reach the Gateway at %s (%s)" % (url, exc)
                proxy = ignored_proxy(url, os.environ if env is None else env)
                if proxy:
                    reason += "; %s is set, but the plugin connects directly" % proxy
                c.add("gateway", FAIL, "%s; compactions run locally until it answers" % reason, "start the Gateway at %s, or: %s"
                      % (url, set_url("off")))
            else:
                c.add("gateway", WARN, "nothing answers at the default URL %s (not configured): "
                      "running local-only; whatever starts listening there later gets the tool "
                      "results, under the default key 'local' — set %s=off to stay local, or your "
                      "Gateway's URL" % (url, var), set_url("off"))
            return
        except GatewayError as exc:
            hint, better = "", "http://HOST:PORT"
            if "404" in str(exc) or "not JSON" in str(exc):
                hint, better = wrong_path(url, " — no Gateway answers at this URL (check host, "
                                                "port and path)")
            c.add("gateway", FAIL, "GET %s/health failed: %s%s" % (url, exc, hint), set_url(better))
            return
        ms = (time.monotonic() - started) * 1000
        c.add("gateway", PASS if ms < 1000 else WARN, "%s is %s, version %s, %s ms"
              % (settings.describe_gateway(), health.get("status"), health.get("version") or "?",
                 count(ms)), "" if ms < 1000 else "the Gateway answers slowly; compactions may time out")
        if not settings.gateway_configured:
            c.add("gateway", WARN, "a Gateway answers at the default URL %s, which nobody "
                  "configured: the plugin sends it every tool result and compaction" % url,
                  "if it is yours: %s (says so for good); if not: %s" % (set_url(url), set_url("off")))
        _check_credentials(c, client, settings, set_url, set_credentials)
    finally:
        client.close()


def _check_credentials(c: Checks, client: "GatewayClient", settings: Settings,
                       set_url: Callable[[str], str], set_credentials: str) -> None:
    """An authenticated call proves the API key and instance id are accepted."""
    from ..memory_gateway.client import GatewayError, GatewayNotSupported, GatewayRejected
    url = settings.gateway_url
    try:
        client.query_mmd("tdo-doctor-%s" % uuid.uuid4().hex[:12], limit=1)
        c.add("gateway", PASS, "API key and instance id %r accepted (query-mmd answered)%s"
              % (settings.instance_id, "; " + DEFAULT_KEY if settings.api_key == "local" else ""))
    except GatewayNotSupported:
        hint, better = wrong_path(url, "")
        c.add("gateway", FAIL, "%s has no /v2/offload routes: not an offload V2 Gateway, or a "
              "wrong path in the URL%s" % (url, hint), set_url(better))
    except GatewayRejected as exc:
        if exc.auth_refused:
            c.add("gateway", FAIL, "the Gateway refused the credentials (%s)%s" % (
                exc, "; " + DEFAULT_KEY if settings.api_key == "local" else ""), set_credentials)
        else:
            c.add("gateway", PASS, "API key and instance id accepted (query-mmd answered %s)" % exc)
    except GatewayError as exc:
        c.add("gateway", FAIL, "authenticated call failed: %s" % exc,
              "look at the Gateway's log; meanwhile, to run local-only: %s" % set_url("off"))


# --- the command ------------------------------------------------------------------------

def run_checks(plugin_dir: Path, timeout: float, store: Optional[str] = None) -> Checks:
    c = Checks()
    env = effective_env()
    if store:                       # --store DIR: check that store, as status and archive read it
        env = dict(env, **{PREFIX + "STORE_DIR": store})
    home = hermes_home(env)
    config = read_config(home)
    block = config.block()
    check_python(c)
    version = check_hermes(c, env)
    if check_home(c, env, home):
        check_copy_home(c, env, home, plugin_dir)
    check_install(c, home, plugin_dir, version)
    check_config(c, config, version)
    settings, bad = check_settings(c, env, home, config.path, block, configured_window(config),
                                   of_release(version))
    for _suffix, message, fix in overridden(os.environ, home, config.path, block):
        c.add("settings", WARN, message, fix)

    def set_value(name: str, value: str) -> str:
        return source_of(name, env, home, config.path, block).set_command(name, value)

    def set_url(value: str) -> str:
        return set_value("GATEWAY_URL", value)
    creds = " && ".join(source_of(s, env, home, config.path, block).set_command(s, v) for s, v in
                        sorted(CREDENTIAL_PLACEHOLDERS.items()))
    off_by = next((s for s in GATEWAY_OFF if s in bad), "GATEWAY_URL")   # what turned it off
    check_gateway(c, settings, timeout, bad.get(off_by, ""), set_url, creds, off_by, env)
    check_store(c, settings, env, plugin_dir)
    for row in secret_checks(settings, set_value) + memory_checks(env, config, settings, home) + \
            lcm_checks(env, config, settings, home, of_release(version)):
        c.add(row["name"], row["status"], row["message"], row.get("fix", ""))
    return c


def summary(items: List[Dict[str, str]]) -> str:
    """The last line: failures and warnings counted (a warning is never "all passed")."""
    failed = sum(1 for i in items if i["status"] == FAIL)
    warned = sum(1 for i in items if i["status"] == WARN)
    if not failed:
        return "passed with %s" % plural(warned, "warning") if warned else "all checks passed"
    return "%d check(s) failed%s" % (failed, ", %s" % plural(warned, "warning") if warned else "")


def cmd_doctor(args: argparse.Namespace) -> int:
    checks = run_checks(Path(args.plugin_dir), max(0.2, args.timeout), getattr(args, "store", None))
    if args.json:
        print(json.dumps({"ok": not checks.failed, "hermes_home": str(hermes_home(effective_env())),
                          "summary": summary(checks.items), "checks": checks.items}, ensure_ascii=False, indent=2))
    else:
        for item in checks.items:
            line = "%-4s  %-8s %s" % (item["status"], item["name"], item["message"])
            if item["fix"] and item["status"] != PASS:
                line += " — fix: " + item["fix"]
            print(line)
        print("\n" + summary(checks.items))
    if checks.failed:
        first = next(i for i in checks.items if i["status"] == FAIL)
        sys.stderr.write("tencentdb-offload doctor: %d check(s) failed, first: %s: %s\n"
                         % (sum(1 for i in checks.items if i["status"] == FAIL), first["name"],
                            first["message"]))
        return 1
    return 0
