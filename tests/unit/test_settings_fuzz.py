"""No setting stops the plugin from loading: every TENCENTDB_OFFLOAD_* variable with hundreds of
garbage values; ``load_settings`` and ``build_runtime`` never raise, ``register(ctx)`` neither."""

import random
import urllib.parse

import pytest

import tencentdb_offload as plugin
from tencentdb_offload.settings.config import PREFIX, SPEC, Settings, load_settings

NASTY = ["", " ", "\x00", "a\x00b", "\n", "\r\n", "\t", "\u201coff\u201d", "密钥", "é", "\udcff",
         "nan", "NaN", "inf", "-inf", "1e309", "-0", "0", "1", "-1", "0x10", "1_000", "9" * 5000,
         "1e-300", "0.0000001", "0.999999999999", "true", "TRUE", "yes", "ja", "None", "null",
         "[]", "{}", "'", '"', "\\", "~", "~nouser/x", "~root/../x", "relative/dir", "./x", "..",
         "/", "http://", "https://", "http://127.0.0.1:84200", "http://host:port", "http://[::1",
         "http://[::1]:99999", "http://:80", "http://127.0.0.1:0", "http://a b:1",
         "http://u:p@127.0.0.1:1", "http://127.0.0.1:1/\r\nX: y", "file:///etc/passwd",
         "x" * 100_000, "%s", "%d", "{0}", "\ud800"]


def garbage(rng: random.Random, n: int):
    alphabet = "abc019 .-_:/@[]%~\\\x00\x01\x1b\x7f\n\r\té中\u201c\u2028\udcff"
    out = list(NASTY)
    while len(out) < n:
        out.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40))))
    return out


def local_only(settings: Settings) -> bool:
    """A garbage URL that happens to be valid must not make the test talk to the network."""
    if not settings.gateway_enabled:
        return True
    return urllib.parse.urlsplit(settings.gateway_url).hostname == "127.0.0.1"


@pytest.mark.parametrize("suffix", sorted(SPEC))
def test_every_value_of_every_variable_loads(suffix):
    rng = random.Random(suffix)
    for value in garbage(rng, 400):
        settings, warnings = load_settings({PREFIX + suffix: value})
        assert isinstance(settings, Settings) and isinstance(warnings, list)
        assert settings.compact_ratio < settings.threshold
        assert int(settings.threshold * 4096) >= 1
        settings.public()
        settings.resolved_store_dir({"HERMES_HOME": "/nonexistent-home"})


def test_config_block_values_of_any_type_load():
    odd = [None, 1, -1, 0.5, float("nan"), [], {}, object(), b"\x00", True, 10 ** 400]
    for suffix, (attr, _parse) in SPEC.items():
        for value in odd:
            settings, _w = load_settings({}, {attr: value})
            assert isinstance(settings, Settings)


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """Relative and ~ store dirs land inside the test's directory."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.setenv("HERMES_HOME", str(tmp_path / "home"))
    for var in [v for v in __import__("os").environ if v.startswith(PREFIX)]:
        monkeypatch.delenv(var)
    return tmp_path


@pytest.mark.parametrize("suffix", sorted(SPEC))
def test_build_runtime_always_works(sandbox, suffix):
    rng = random.Random("rt" + suffix)
    for value in garbage(rng, 40):
        env = {"HERMES_HOME": str(sandbox / "home"), PREFIX + "GATEWAY_URL": "off",
               PREFIX + suffix: value}
        settings, _w = load_settings(env)
        if not local_only(settings):
            continue
        rt = plugin.build_runtime(env=env)
        try:
            assert rt.mode in ("local", "disabled", "gateway", "local (gateway unavailable)")
            rt.status()
        finally:
            rt.close()


class FakeCtx:
    def __init__(self):
        self.registered = []

    def register_context_engine(self, engine):
        self.registered.append(engine)

    def register_hook(self, name, fn):
        self.registered.append(name)

    def register_middleware(self, name, fn):
        self.registered.append(name)

    def register_command(self, name, handler, description="", args_hint=""):
        self.registered.append(name)


def test_register_never_raises(sandbox, monkeypatch):
    """Each value in a fresh process state: register() builds the runtime once per process."""
    import sys
    rng = random.Random("register")
    for suffix in sorted(SPEC):
        for value in garbage(rng, 12)[:60:5] + ["http://127.0.0.1:84200", "~nouser/x"]:
            if "\x00" in value or any(0xD800 <= ord(ch) <= 0xDBFF for ch in value):
                continue            # the OS refuses these in an environment variable
            monkeypatch.setenv(PREFIX + "GATEWAY_URL", "off")
            monkeypatch.setenv(PREFIX + suffix, value)
            if not local_only(load_settings(__import__("os").environ)[0]):
                continue
            sys.modules.pop("_tencentdb_offload_process", None)
            ctx = FakeCtx()
            plugin.register(ctx)
            engine = ctx.registered[0]
            assert engine.name == "tencentdb-offload" and not engine.runtime.closed
            engine.runtime.close()
            monkeypatch.delenv(PREFIX + suffix, raising=False)


@pytest.mark.parametrize("url", ["http://127.0.0.1:84200", "http://host:port", "http://",
                                 "http://[::1", "ftp://x"])
def test_bad_url_turns_the_gateway_off_with_a_warning(url):
    settings, warnings = load_settings({PREFIX + "GATEWAY_URL": url})
    assert settings.gateway_url == "" and not settings.gateway_enabled
    assert len(warnings) == 1 and "Gateway is off" in warnings[0]


@pytest.mark.parametrize("value, problem", [("~nouser_tdo/x", "does not exist"),
                                            ("a\x00b", "NUL")])
def test_bad_store_dir_warns_and_uses_the_default(value, problem):
    settings, warnings = load_settings({PREFIX + "STORE_DIR": value})
    assert settings.store_dir == "" and problem in warnings[0]
    assert settings.resolved_store_dir({"HERMES_HOME": "/h"}).as_posix() == "/h/tencentdb-offload"


def test_the_default_a_warning_names_is_the_one_a_user_would_write(tmp_path):
    _s, warnings = load_settings({PREFIX + "STORE_DIR": "~nouser_tdo/x", "HERMES_HOME": str(tmp_path),
                                  PREFIX + "ENABLED": "maybe"})
    said = " ".join(warnings)
    assert "using the default %s" % (tmp_path / "tencentdb-offload") in said, said
    assert "default ''" not in said and "using the default true" in said and "True" not in said


def test_relative_store_dir_and_zero_token_threshold_warn():
    settings, warnings = load_settings({PREFIX + "STORE_DIR": "data/store"})
    assert settings.store_dir == "data/store" and "relative path" in warnings[0]
    settings, warnings = load_settings({PREFIX + "THRESHOLD": "0.0001"})
    assert settings.threshold == 0.75 and "0 tokens" in warnings[0]
    # a Settings built by hand with a bad store dir still resolves
    assert Settings(store_dir="a\x00b").resolved_store_dir({"HERMES_HOME": "/h"}).name == "tencentdb-offload"
