"""One Gateway beside memory_tencentdb (issue 20.6): TencentDB's variables as fallbacks for ours
(``settings/gateway_env``), doctor's memory-provider rows (``ops/doctor_memory``), and the fake provider
and the fake Gateway's /v3 memory routes the e2e tests rely on (over real sockets)."""
from __future__ import annotations

import json
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:
    sys.path.append(str(REPO_ROOT))

from tencentdb_offload.settings.config import load_settings  # noqa: E402
from tencentdb_offload.settings.gateway_env import resolve  # noqa: E402
from tencentdb_offload.hermes.config import ConfigFile  # noqa: E402
from tencentdb_offload.ops.doctor_memory import memory_checks  # noqa: E402
from tests.fakes.gateway import FakeGateway  # noqa: E402
from tests.fakes import memory_tencentdb as fake_provider  # noqa: E402


# --- gateway_env.resolve -----------------------------------------------------------------

def _values(env):
    return {k: (f.value, f.source, f.fallback) for k, f in resolve(env).items()}


def test_nothing_set_means_nothing_resolved():
    assert resolve({"HOME": "/x", "OTHER": "1"}) == {}


def test_tdai_memory_variables_fill_in():
    got = _values({"TDAI_MEMORY_ENDPOINT": "http://gw:9000", "TDAI_MEMORY_API_KEY": "k1",
                   "TDAI_MEMORY_SERVICE_ID": "svc"})
    assert got == {"GATEWAY_URL": ("http://gw:9000", "TDAI_MEMORY_ENDPOINT", True),
                   "API_KEY": ("k1", "TDAI_MEMORY_API_KEY", True),
                   "INSTANCE_ID": ("svc", "TDAI_MEMORY_SERVICE_ID", True)}


def test_provider_host_port_compose_a_url_like_the_provider():
    assert _values({"MEMORY_TENCENTDB_GATEWAY_HOST": " gw.local ", "MEMORY_TENCENTDB_GATEWAY_PORT": "9100"}) \
        ["GATEWAY_URL"] == ("http://gw.local:9100", "MEMORY_TENCENTDB_GATEWAY_HOST/_PORT", True)
    assert _values({"MEMORY_TENCENTDB_GATEWAY_PORT": "9100"})["GATEWAY_URL"] == \
        ("http://127.0.0.1:9100", "MEMORY_TENCENTDB_GATEWAY_PORT", True)
    assert _values({"MEMORY_TENCENTDB_GATEWAY_HOST": "gw"})["GATEWAY_URL"][0] == "http://gw:8420"
    # the provider falls back to 8420 on a bad port; so do we (same Gateway as it talks to)
    assert _values({"MEMORY_TENCENTDB_GATEWAY_PORT": "99999"})["GATEWAY_URL"][0] == "http://127.0.0.1:8420"
    assert _values({"MEMORY_TENCENTDB_GATEWAY_HOST": "::1"})["GATEWAY_URL"][0] == "http://[::1]:8420"


def test_provider_keys_in_its_own_order_blank_skipped():
    env = {"MEMORY_TENCENTDB_GATEWAY_API_KEY": "  ", "TDAI_GATEWAY_API_KEY": "k2"}
    assert _values(env)["API_KEY"] == ("k2", "TDAI_GATEWAY_API_KEY", True)
    env["MEMORY_TENCENTDB_GATEWAY_API_KEY"] = "k1"
    assert _values(env)["API_KEY"] == ("k1", "MEMORY_TENCENTDB_GATEWAY_API_KEY", True)
    env["TDAI_MEMORY_API_KEY"] = "k0"        # the context engine's name beats the provider's
    assert _values(env)["API_KEY"][1] == "TDAI_MEMORY_API_KEY"


def test_ours_win_even_when_empty():
    env = {"TENCENTDB_OFFLOAD_GATEWAY_URL": "off", "TDAI_MEMORY_ENDPOINT": "http://gw:9000",
           "MEMORY_TENCENTDB_GATEWAY_PORT": "9100", "TENCENTDB_OFFLOAD_API_KEY": "",
           "TDAI_GATEWAY_API_KEY": "theirs"}
    got = _values(env)
    assert got["GATEWAY_URL"] == ("off", "TENCENTDB_OFFLOAD_GATEWAY_URL", False)
    assert got["API_KEY"] == ("", "TENCENTDB_OFFLOAD_API_KEY", False)
    assert "INSTANCE_ID" not in got


def test_load_settings_uses_the_fallbacks():
    s, warnings = load_settings({"MEMORY_TENCENTDB_GATEWAY_PORT": "9100", "TDAI_GATEWAY_API_KEY": "k2",
                                 "TDAI_MEMORY_SERVICE_ID": "svc"})
    assert (s.gateway_url, s.api_key, s.instance_id) == ("http://127.0.0.1:9100", "k2", "svc")
    s, _ = load_settings({"MEMORY_TENCENTDB_GATEWAY_PORT": "9100",
                          "TENCENTDB_OFFLOAD_GATEWAY_URL": "http://ours:1"})
    assert s.gateway_url == "http://ours:1"


# --- ops/doctor_memory --------------------------------------------------------------------

def _config(tmp_path, data):
    return ConfigFile(tmp_path / "config.yaml", data, "", "test")


def _install(home: Path, where: str = "user") -> None:
    d = home / "plugins" / "memory_tencentdb" if where == "user" else \
        home / "hermes-agent" / "plugins" / "memory" / "memory_tencentdb"
    d.mkdir(parents=True)
    (d / "__init__.py").write_text("class MemoryProvider: ...\n")


GOOD = {"plugins": {"enabled": ["tencentdb-offload"]}, "context": {"engine": "tencentdb-offload"},
        "memory": {"provider": "memory_tencentdb"}}


def _rows(tmp_path, env, data=GOOD, install="user"):
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    if install:
        _install(home, install)
    env = dict({"HOME": str(tmp_path / "nohome")}, **env)
    settings, _ = load_settings(env)
    return memory_checks(env, _config(tmp_path, data), settings, home)


def _warnings(rows):
    return [r["message"] for r in rows if r["status"] == "warn"]


def test_no_rows_when_the_provider_is_not_in_use(tmp_path):
    assert _rows(tmp_path, {}, {"plugins": {"enabled": ["tencentdb-offload"]}}, install=None) == []


def test_the_working_combination_passes(tmp_path):
    rows = _rows(tmp_path, {"MEMORY_TENCENTDB_GATEWAY_PORT": "8420"})
    assert [r["status"] for r in rows] == ["pass", "pass"] and all(set(r) == {"name", "status", "message", "fix"}
                                                            for r in rows)
    assert "URL from MEMORY_TENCENTDB_GATEWAY_PORT" in rows[1]["message"]


def test_enabled_but_not_selected(tmp_path):
    data = {"plugins": {"enabled": ["tencentdb-offload", "memory_tencentdb"]}}
    (w,) = _warnings(_rows(tmp_path, {}, data, install=None))
    assert "memory.provider" in w and "plugins.enabled does not" in w
    (w,) = _warnings(_rows(tmp_path / "b", {}, dict(GOOD, memory={"provider": "memory-tencentdb"}), install=None))
    assert "directory" in w


def test_installed_where_a_pip_hermes_does_not_look(tmp_path):
    (w,) = _warnings(_rows(tmp_path, {}, install="installer"))
    assert "hermes-agent" in w and "does not look" in w


def test_host_or_port_differs_from_our_url(tmp_path):
    (w,) = _warnings(_rows(tmp_path, {"MEMORY_TENCENTDB_GATEWAY_PORT": "9100",
                                      "TENCENTDB_OFFLOAD_GATEWAY_URL": "http://127.0.0.1:8420"}))
    assert "http://127.0.0.1:9100" in w and "two different Gateways" in w
    assert _warnings(_rows(tmp_path / "b", {"MEMORY_TENCENTDB_GATEWAY_HOST": "gw", "MEMORY_TENCENTDB_GATEWAY_PORT":
                                            "9100", "TENCENTDB_OFFLOAD_GATEWAY_URL": "http://GW:9100/"})) == []


def test_key_set_for_one_plugin_only(tmp_path):
    (w,) = _warnings(_rows(tmp_path, {"TENCENTDB_OFFLOAD_API_KEY": "sekret-1"}))
    assert "this plugin only" in w and "sekret" not in w
    (w,) = _warnings(_rows(tmp_path / "b", {"TENCENTDB_OFFLOAD_API_KEY": "local",
                                            "MEMORY_TENCENTDB_GATEWAY_API_KEY": "sekret-2"}))
    assert "memory_tencentdb only" in w and "sekret" not in w
    (w,) = _warnings(_rows(tmp_path / "c", {"TENCENTDB_OFFLOAD_API_KEY": "a", "TDAI_GATEWAY_API_KEY": "b"}))
    assert "different Gateway API keys" in w
    assert _warnings(_rows(tmp_path / "d", {"TENCENTDB_OFFLOAD_API_KEY": "same",
                                            "TDAI_GATEWAY_API_KEY": "same"})) == []


def test_instance_differs_from_the_providers_default(tmp_path):
    (w,) = _warnings(_rows(tmp_path, {"TENCENTDB_OFFLOAD_INSTANCE_ID": "inst-7"}))
    assert "'default'" in w and "inst-7" in w


def test_gateway_cmd_and_a_discovered_gateway(tmp_path):
    (w,) = _warnings(_rows(tmp_path, {"MEMORY_TENCENTDB_GATEWAY_CMD": "node server.ts"}))
    assert "MEMORY_TENCENTDB_GATEWAY_CMD" in w and "per chat process" in w
    server = tmp_path / "nohome" / "tdai-memory-openclaw-plugin" / "src" / "gateway" / "server.ts"
    server.parent.mkdir(parents=True)
    server.write_text("")
    (w,) = _warnings(_rows(tmp_path / "b", {"HOME": str(tmp_path / "nohome")}))
    assert "discover" in w


# --- the fake provider against the fake Gateway's /v3 routes --------------------------------

PERSONA = "The user is Mira, a data engineer who prefers terse answers."


@pytest.fixture
def gw_and_provider(monkeypatch):
    with FakeGateway(api_key="mem-key") as gw:
        gw.seed_memory(persona=PERSONA, atomic=[{"type": "persona", "content": "Mira likes SQL"}],
                       scenes={"pipeline-migration.md": "Move ETL to Airflow."})
        port = gw.url.rsplit(":", 1)[1]
        monkeypatch.setenv("MEMORY_TENCENTDB_GATEWAY_PORT", port)
        monkeypatch.setenv("MEMORY_TENCENTDB_GATEWAY_API_KEY", "mem-key")
        p = fake_provider.MemoryTencentdbProvider()
        assert p.is_available()
        p.initialize("s-1")
        yield gw, p
        p.shutdown()


def test_fake_provider_prefetch_and_headers(gw_and_provider):
    gw, p = gw_and_provider
    text = p.prefetch("what does Mira like about SQL")
    assert "<relevant-memories>" in text and "- [persona] Mira likes SQL" in text
    assert "<user-core>\n%s\n</user-core>" % PERSONA in text
    assert "<scene-navigation>" in text and "- Scene: pipeline-migration" in text
    v3 = [r for r in gw.requests if r.path.startswith("/v3/")]
    assert [r.path for r in v3] == ["/v3/atomic/search", "/v3/core/read", "/v3/scenario/ls"]
    for r in v3:
        assert r.headers["authorization"] == "Bearer mem-key" and r.headers["x-tdai-service-id"] == "default"
        assert (r.body["team_id"], r.body["agent_id"], r.body["user_id"]) == ("default",) * 3
    assert "memory_tencentdb_memory_search" in p.system_prompt_block()
    assert [t["name"] for t in p.get_tool_schemas()] == ["memory_tencentdb_memory_search",
                                                         "memory_tencentdb_conversation_search",
                                                         "memory_tencentdb_read_scene"]


def test_fake_provider_capture_and_tools(gw_and_provider):
    gw, p = gw_and_provider
    p.sync_turn("please migrate the pipeline", "done: migrated", session_id="s-1")
    p.shutdown()                                  # joins the capture thread, like the real one
    turns = gw.captured_turns()
    assert [(m["role"], m["content"]) for m in turns] == [("user", "please migrate the pipeline"),
                                                          ("assistant", "done: migrated")]
    p.initialize("s-1")
    assert p.handle_tool_call("memory_tencentdb_memory_search", {"query": "SQL"}) == "- [persona] Mira likes SQL"
    assert p.handle_tool_call("memory_tencentdb_memory_search", {"query": "kayaking"}) == \
        "No memories found for this query."
    assert "[user] please migrate the pipeline" in p.handle_tool_call(
        "memory_tencentdb_conversation_search", {"query": "migrate pipeline", "limit": "3"})
    assert p.handle_tool_call("memory_tencentdb_read_scene", {"scene_id": "pipeline-migration"}) == \
        "Move ETL to Airflow."


def test_v3_routes_check_the_key(gw_and_provider):
    gw, _ = gw_and_provider
    req = urllib.request.Request(gw.url + "/v3/core/read", data=b"{}", method="POST",
                                 headers={"Authorization": "Bearer wrong", "x-tdai-service-id": "default"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 401
    assert json.loads(err.value.read())["code"] == 401


# --- the README's combined configuration -------------------------------------------------

def _readme_section():
    from tencentdb_offload.hermes.config import mini_yaml
    from tests.fakes.memory_tencentdb import readme
    return readme.parse(readme.FIXTURE.read_text(encoding="utf-8"), mini_yaml)


def test_readme_section_names_the_working_combination():
    section = _readme_section()
    assert section.config["memory"] == {"provider": "memory_tencentdb"}
    assert section.config["context"] == {"engine": "tencentdb-offload"}
    assert "tencentdb-offload" in section.config["plugins"]["enabled"]
    assert section.install_dir == "plugins/memory_tencentdb"
    assert not any(k.startswith("TENCENTDB_OFFLOAD_") for k in section.env), "one set of variables"


def test_readme_configuration_passes_doctor(tmp_path):
    section = _readme_section()
    home = tmp_path / "home"
    _install(home)
    env = dict(section.env, HOME=str(tmp_path / "nohome"))
    settings, warnings = load_settings(env)
    assert warnings == []
    rows = memory_checks(env, _config(tmp_path, section.config), settings, home)
    assert [r["status"] for r in rows] == ["pass", "pass"], rows


def test_sources_line_names_each_variable():
    from tencentdb_offload.settings.gateway_env import sources_line
    env = {"MEMORY_TENCENTDB_GATEWAY_HOST": "gw", "MEMORY_TENCENTDB_GATEWAY_PORT": "9", "TDAI_GATEWAY_API_KEY": "k"}
    assert sources_line(env) == ("URL from MEMORY_TENCENTDB_GATEWAY_HOST/_PORT, key from TDAI_GATEWAY_API_KEY, "
                                 "instance from the default")
    assert sources_line(dict(env, TENCENTDB_OFFLOAD_API_KEY="x"), {"gateway_url": "http://a:1"}) == \
        "URL from tencentdb_offload.gateway_url, key from TENCENTDB_OFFLOAD_API_KEY, instance from the default"
