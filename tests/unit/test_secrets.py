"""Secrets never leave: keys that cannot go in a header and URL credentials are never sent and
never appear in a log line, status, health, doctor output or exception text."""

import json
import logging

import pytest

import tencentdb_offload as plugin
from fakes.gateway import FakeGateway
from tencentdb_offload.settings.config import Settings, hermes_home, load_settings
from tencentdb_offload.memory_gateway.client import GatewayClient, GatewayConfigError
from tencentdb_offload.ops import doctor

from helpers import env_for

SECRET = "hunter2XYZ"
BAD_KEYS = [SECRET + "\nInjected: 1", SECRET + "\r\nX-Evil: 1", "\u201c" + SECRET + "\u201d",
            "'" + SECRET + "\u00e9", SECRET + "\x00", "密钥" + SECRET, SECRET + "\t\x7f"]


def doctor_text(env, settings=None):
    """What doctor prints for these settings (its settings and Gateway checks)."""
    c = doctor.Checks()
    bad = {}
    if settings is None:
        home = hermes_home(env)
        settings, bad = doctor.check_settings(c, env, home, home / "config.yaml", None)
    doctor.check_gateway(c, settings, 0.5, bad.get("GATEWAY_URL", ""), lambda v: "set " + v, "set the key")
    return json.dumps(c.items, ensure_ascii=False)


def everything_printed(rt, caplog):
    try:
        health = rt.health()
    except Exception as exc:            # a leak through an exception counts too
        health = repr(exc)
    return "\n".join([caplog.text, json.dumps(rt.status(), ensure_ascii=False, default=str),
                      json.dumps(health, ensure_ascii=False, default=str), repr(rt.client),
                      repr(rt.settings)])


@pytest.mark.parametrize("var", ["API_KEY", "INSTANCE_ID"])
@pytest.mark.parametrize("value", BAD_KEYS)
def test_header_unsafe_credential_is_a_config_error_never_sent(tmp_path, caplog, var, value):
    caplog.set_level(logging.DEBUG)
    with FakeGateway() as gw:
        env = env_for(tmp_path, gateway_url=gw.url)
        env["TENCENTDB_OFFLOAD_" + var] = value
        rt = plugin.build_runtime(env=env)
        text = everything_printed(rt, caplog) + doctor_text(env)
        rt.close()
        sent = json.dumps([r.headers for r in gw.requests], ensure_ascii=False)
    assert SECRET not in text and SECRET not in sent
    assert rt.client is None and rt.mode == "local"            # the plugin still works
    warned = [w for w in rt.warnings if "TENCENTDB_OFFLOAD_" + var in w]
    assert len(warned) == 1 and "HTTP header" in warned[0] and "Gateway is off" in warned[0]


@pytest.mark.parametrize("value", BAD_KEYS)
def test_client_refuses_to_send_an_unsafe_key(value):
    with FakeGateway() as gw:
        c = GatewayClient(gw.url, value, "svc")
        for call in (lambda: c.ingest("hermes-s1", []), lambda: c.health(force=True),
                     c.ensure_reachable):
            with pytest.raises(GatewayConfigError) as err:
                call()
            assert "TENCENTDB_OFFLOAD_API_KEY" in str(err.value) and SECRET not in str(err.value)
        assert gw.requests == []
        assert SECRET not in json.dumps(c.status(), ensure_ascii=False) + repr(c)
        settings = Settings(gateway_url=gw.url, api_key=value)   # built without load_settings
        assert not settings.gateway_enabled
        assert SECRET not in doctor_text({}, settings)


def test_url_credentials_dropped_everywhere(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    with FakeGateway() as gw:
        url = gw.url.replace("http://", "http://admin:%s@" % SECRET)
        env = env_for(tmp_path, gateway_url=url)
        rt = plugin.build_runtime(env=env)
        assert rt.client is not None and rt.health()["ok"]      # works, without the password
        text = everything_printed(rt, caplog) + doctor_text(env)
        rt.close()
        sent = json.dumps([r.headers for r in gw.requests])
        gw_port = gw.port
    assert SECRET not in text and SECRET not in sent and "admin" not in text
    assert any("credentials" in w for w in rt.warnings)
    # the Gateway gone: exception text and status still clean
    c = GatewayClient("http://admin:%s@127.0.0.1:%d" % (SECRET, gw_port), "k", "svc",
                      ingest_timeout_ms=300)
    with pytest.raises(Exception) as err:
        c.ingest("hermes-s1", [])
    assert SECRET not in str(err.value) + repr(err.value) + json.dumps(c.status())


@pytest.mark.parametrize("url", ["http://admin:%s@host:port" % SECRET,
                                 "http://admin:%s@[::1" % SECRET, "ftp://admin:%s@x" % SECRET])
def test_bad_url_with_credentials_is_redacted_in_the_warning(url):
    settings, warnings = load_settings({"TENCENTDB_OFFLOAD_GATEWAY_URL": url})
    assert not settings.gateway_enabled and len(warnings) == 1
    assert SECRET not in warnings[0] and "TENCENTDB_OFFLOAD_GATEWAY_URL" in warnings[0]
    with pytest.raises(ValueError) as err:
        GatewayClient(url, "k", "svc")
    assert SECRET not in str(err.value)


def test_settings_built_by_hand_never_show_credentials():
    s = Settings(gateway_url="http://admin:%s@127.0.0.1:1" % SECRET, instance_id="x\n" + SECRET)
    assert SECRET not in json.dumps(s.public()) and "admin" not in json.dumps(s.public())
    assert not s.gateway_enabled
