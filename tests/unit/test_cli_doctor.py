"""``doctor``: every misconfiguration it claims to catch is created here and must fail the
run with the right check; one good setup passes. Runs without Hermes (the stdlib config
reader); under a Hermes venv the same tests go through Hermes' own config reader."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # for ``tests.fakes``; appended so plugin modules never shadow
    sys.path.append(str(ROOT))

from tests.fakes.gateway import FakeGateway  # noqa: E402
from helpers import assert_serial_for_default_port, run_cli  # noqa: E402

NAME = "tencentdb-offload"
GOOD_CONFIG = """# written by a person, not JSON
model:
  default: some-model
context:
  engine: tencentdb-offload   # our engine
plugins:
  enabled:
    - other-plugin
    - tencentdb-offload
"""


@pytest.fixture(scope="module")
def gateway():
    gw = FakeGateway(api_key="right").start()
    yield gw
    gw.stop()


def unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def install(home: Path) -> Path:
    dest = home / "plugins" / NAME
    dest.mkdir(parents=True)
    for f in list(ROOT.glob("*.py")) + [ROOT / "plugin.yaml"]:
        shutil.copy2(f, dest / f.name)
    return dest


def setup_home(tmp_path: Path, gw: FakeGateway, env: dict = None, config: str = GOOD_CONFIG,
               plugin: bool = True) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    if plugin:
        install(home)
    (home / "config.yaml").write_text(config)
    settings = {"TENCENTDB_OFFLOAD_GATEWAY_URL": gw.url, "TENCENTDB_OFFLOAD_API_KEY": "right",
                "TENCENTDB_OFFLOAD_INSTANCE_ID": "inst-1"}
    settings.update(env or {})
    (home / ".env").write_text("".join("%s=%s\n" % kv for kv in settings.items() if kv[1] is not None))
    return home


def doctor(home: Path, *extra: str):
    return run_cli(["doctor", "--json", "--timeout", "2"] + list(extra),
                   env={"HERMES_HOME": str(home)}, cwd=home.parent)


def checks(proc) -> list:
    return json.loads(proc.stdout)["checks"]


def test_good_setup_passes(tmp_path, gateway):
    home = setup_home(tmp_path, gateway)
    proc = doctor(home)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    items = checks(proc)
    assert [c for c in items if c["status"] == "fail"] == []
    names = {c["name"] for c in items if c["status"] == "pass"}
    assert {"python", "install", "config", "settings", "gateway", "store"} <= names
    text = " ".join(c["message"] for c in items)
    assert "accepted" in text and "version 0.1.0" in text and "ms" in text
    # the one doctor run as a user runs it: a new Python on the plugin directory
    plain = subprocess.run([sys.executable, str(ROOT), "doctor"], capture_output=True, text=True,
                           env=dict(os.environ, HERMES_HOME=str(home), PYTHONDONTWRITEBYTECODE="1"),
                           timeout=60)
    warned = sum(1 for c in items if c["status"] == "warn")
    assert plain.returncode == 0 and plain.stdout.rstrip().splitlines()[-1] == (
        "passed with %d warning%s" % (warned, "s" * (warned > 1)) if warned else "all checks passed")
    assert all(line.split()[0] in ("pass", "warn") for line in plain.stdout.splitlines()[:-2] if line)
    # doctor reads; it writes nothing into HERMES_HOME
    assert sorted(p.name for p in home.iterdir()) == [".env", "config.yaml", "plugins"]


CASES = {
    # name: (env overrides, config text, plugin installed, failing check, text in its message)
    "plugin not enabled": ({}, GOOD_CONFIG.replace("    - tencentdb-offload\n", ""), True,
                           "config", "plugins.enabled"),
    "no plugins section": ({}, "context:\n  engine: tencentdb-offload\n", True,
                           "config", "plugins.enabled"),
    "wrong engine name": ({}, GOOD_CONFIG.replace("engine: tencentdb-offload", "engine: tencentdb_offload"),
                          True, "config", "context.engine"),
    "plugin not installed": ({}, GOOD_CONFIG, False, "install", "no tencentdb-offload plugin"),
    "hermes compression off": ({}, GOOD_CONFIG + "compression:\n  enabled: false\n", True,
                               "config", "Hermes never calls the engine"),
    "bad setting value": ({"TENCENTDB_OFFLOAD_THRESHOLD": "high"}, GOOD_CONFIG, True,
                          "settings", "TENCENTDB_OFFLOAD_THRESHOLD"),
    "bad setting in config block": ({}, GOOD_CONFIG + "tencentdb_offload:\n  compact_ratio: 7\n", True,
                                    "settings", "compact_ratio"),
    "gateway down": ({"TENCENTDB_OFFLOAD_GATEWAY_URL": "http://127.0.0.1:%d" % unused_port()},
                     GOOD_CONFIG, True, "gateway", "cannot reach"),
    "wrong key": ({"TENCENTDB_OFFLOAD_API_KEY": "wrong"}, GOOD_CONFIG, True,
                  "gateway", "refused the credentials"),
    "wrong url": ({"TENCENTDB_OFFLOAD_GATEWAY_URL": "{url}/not-the-gateway"}, GOOD_CONFIG, True,
                  "gateway", "no Gateway answers at this URL"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_misconfiguration_fails_its_check(tmp_path, gateway, case):
    env, config, plugin, check, needle = CASES[case]
    env = {k: v.replace("{url}", gateway.url) for k, v in env.items()}
    home = setup_home(tmp_path, gateway, env, config, plugin)
    proc = doctor(home)
    assert proc.returncode == 1, proc.stdout
    failed = [c for c in checks(proc) if c["status"] == "fail"]
    assert [c["name"] for c in failed] == [check], failed
    assert needle in failed[0]["message"] and failed[0]["fix"], failed[0]
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "1 check(s) failed" in err[0], proc.stderr


def test_wrong_plugin_kind_and_outbox_warning(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_GATEWAY_URL": "off"})
    yml = home / "plugins" / NAME / "plugin.yaml"
    yml.write_text(yml.read_text().replace("kind: standalone", "kind: backend"))
    store = home / "tencentdb-offload"
    store.mkdir()
    import sqlite3
    conn = sqlite3.connect(str(store / "store.db"))
    conn.execute("CREATE TABLE outbox(id INTEGER PRIMARY KEY, session TEXT NOT NULL, kind TEXT NOT NULL, "
                 "payload TEXT NOT NULL, created REAL NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, "
                 "dead INTEGER NOT NULL DEFAULT 0, last_error TEXT)")
    conn.execute("INSERT INTO outbox(session, kind, payload, created) VALUES ('s', 'pair', '{}', 0)")
    conn.commit()
    conn.close()
    proc = doctor(home)
    items = checks(proc)
    assert proc.returncode == 1
    assert [c["name"] for c in items if c["status"] == "fail"] == ["install"]
    assert any(c["name"] == "outbox" and c["status"] == "warn" and "1 row waiting" in c["message"]
               for c in items), items


def test_stdlib_yaml_reader_reads_what_hermes_configs_hold():
    from tencentdb_offload.hermes.config import mini_yaml
    text = ("model:\n  default: \"gpt-x\"   # comment\n  context_length: 128000\n"
            "toolsets:\n  - name: a\n    enabled: true\n  - plain\n"
            "context: {engine: tencentdb-offload}\n"
            "plugins:\n  enabled: [foo, 'tencentdb-offload']\n  disabled:\n  - bar\n"
            "tencentdb_offload:\n  threshold: 0.8\n  gateway_url: http://x:1  # c\n"
            "  note: \"a # kept\"\ndesc: >-\n  long\n  text\nafter: 1\n")
    assert mini_yaml(text) == {
        "model": {"default": "gpt-x", "context_length": 128000},
        "toolsets": [{"name": "a", "enabled": True}, "plain"],
        "context": {"engine": NAME}, "plugins": {"enabled": ["foo", NAME], "disabled": ["bar"]},
        "tencentdb_offload": {"threshold": 0.8, "gateway_url": "http://x:1", "note": "a # kept"},
        "desc": "long\ntext", "after": 1}
    assert mini_yaml('{"context": {"engine": "x"}}') == {"context": {"engine": "x"}}
    manifest = mini_yaml((ROOT / "plugin.yaml").read_text())
    assert manifest["name"] == NAME and manifest["kind"] == "standalone"


def test_dotenv_reader(tmp_path):
    from tencentdb_offload.ops.env import read_dotenv
    env = tmp_path / ".env"
    env.write_text("# comment\nexport A=1\nB = 'two words'\nC=\"x=y\"\nD=plain # note\nnot a line\n")
    assert read_dotenv(env) == {"A": "1", "B": "two words", "C": "x=y", "D": "plain"}


# --- issue 11: first run ------------------------------------------------------------------

def _hold_port(port: int, listen: bool):
    """Own 127.0.0.1:port: listening (to count who connects) or bound only (refuses)."""
    assert_serial_for_default_port(port)
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        s.close()
        pytest.skip("127.0.0.1:%d is in use on this machine" % port)
    if listen:
        s.listen(8)
        s.settimeout(0.2)
    return s


def _accepted(s) -> int:
    n = 0
    while True:
        try:
            conn, _ = s.accept()
        except OSError:
            return n
        conn.close()
        n += 1


def _bash(command: str, home: Path) -> None:
    proc = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30,
                          cwd=str(home))
    assert proc.returncode == 0, (command, proc.stderr)


@pytest.mark.default_port
def test_default_install_without_a_gateway_is_a_warning(tmp_path, gateway):
    """The README's install sets no Gateway URL: nothing listens at the default, doctor says
    local-only and exits 0."""
    home = setup_home(tmp_path, gateway, {k: None for k in (
        "TENCENTDB_OFFLOAD_GATEWAY_URL", "TENCENTDB_OFFLOAD_API_KEY", "TENCENTDB_OFFLOAD_INSTANCE_ID")})
    held = _hold_port(8420, listen=False)       # bound, not listening: connection refused
    try:
        proc = doctor(home)
    finally:
        held.close()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (gw,) = [c for c in checks(proc) if c["name"] == "gateway"]
    assert gw["status"] == "warn" and "running local-only" in gw["message"], gw
    _bash(gw["fix"], home)                      # the fix runs, and then the Gateway is off
    (gw,) = [c for c in checks(doctor(home)) if c["name"] == "gateway"]
    assert gw["status"] == "pass" and gw["message"].startswith("off"), gw


@pytest.mark.default_port
def test_invalid_gateway_url_contacts_nothing(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_GATEWAY_URL": "127.0.0.1:8420"})
    listener = _hold_port(8420, listen=True)
    try:
        proc = doctor(home)
        contacted = _accepted(listener)
    finally:
        listener.close()
    assert contacted == 0, "doctor contacted the default endpoint for an invalid URL"
    items = checks(proc)
    (gw,) = [c for c in items if c["name"] == "gateway"]
    assert gw["status"] == "warn"
    assert gw["message"].startswith("Gateway off: TENCENTDB_OFFLOAD_GATEWAY_URL is invalid"), gw
    (bad,) = [c for c in items if c["status"] == "fail"]
    assert bad["name"] == "settings" and str(home / ".env") in bad["message"]
    assert proc.returncode == 1


def test_misspelt_names_get_a_suggestion_and_a_fix_that_works(tmp_path, gateway):
    """A misspelt name whose right spelling is set nowhere means the value meant is not in
    effect: a failure (exit 1), like an invalid value. A misspelling beside the right name,
    or a name close to nothing, is a warning."""
    config = GOOD_CONFIG + "tencentdb_offload:\n  treshold: 0.8\n"
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_TRESHOLD": "0.6",
                                          "TENCENTDB_OFFLOAD_COMPACT_RATIO": "45",
                                          "TENCENTDB_OFFLOAD_XYZZY_QUUX_WIBBLE": "1"}, config)
    proc = doctor(home)
    assert proc.returncode == 1
    items = checks(proc)
    by_name = {c["message"].split()[0].split("=")[0]: c for c in items if c["name"] == "settings"}
    tres = by_name["TENCENTDB_OFFLOAD_TRESHOLD"]
    assert tres["status"] == "fail" and "did you mean TENCENTDB_OFFLOAD_THRESHOLD?" in tres["message"]
    assert "not applied" in tres["message"] and str(home / ".env") in tres["message"]
    assert by_name["treshold"]["status"] == "fail" and "did you mean threshold?" in by_name["treshold"]["message"]
    assert "config.yaml" in by_name["treshold"]["message"]
    assert by_name["TENCENTDB_OFFLOAD_XYZZY_QUUX_WIBBLE"]["status"] == "warn"
    ratio = by_name["TENCENTDB_OFFLOAD_COMPACT_RATIO"]
    assert ratio["status"] == "fail" and "did you mean 0.45?" in ratio["message"]
    text = " ".join(c["message"] + c["fix"] for c in items)
    assert "could not convert" not in text and "Error" not in text
    _bash(ratio["fix"], home)
    _bash(tres["fix"], home)
    after = checks(doctor(home))
    assert not any("TENCENTDB_OFFLOAD_TRESHOLD" in c["message"] for c in after)
    assert [c["status"] for c in after if "treshold" in c["message"]] == ["warn"]  # env now sets it
    assert "compaction at 60% of the window, down to 45%" in " ".join(c["message"] for c in after)


def test_a_block_key_written_as_the_variable_gets_its_block_name(tmp_path, gateway):
    """`THRESHOLD: 0.65` or `TENCENTDB_OFFLOAD_THRESHOLD: 0.65` in the config.yaml block is not
    applied (the key is `threshold`): it was a warning "see README.md, Settings", with no name."""
    config = GOOD_CONFIG + "tencentdb_offload:\n  THRESHOLD: 0.65\n  TENCENTDB_OFFLOAD_CANVAS: false\n"
    home = setup_home(tmp_path, gateway, {}, config)
    proc = doctor(home)
    by_name = {c["message"].split()[0]: c for c in checks(proc) if c["name"] == "settings"}
    for key, right in (("THRESHOLD", "threshold"), ("TENCENTDB_OFFLOAD_CANVAS", "canvas")):
        assert by_name[key]["status"] == "fail" and "did you mean %s?" % right in by_name[key]["message"]
        assert "not applied" in by_name[key]["message"], by_name[key]
    assert by_name["THRESHOLD"]["fix"].startswith("rename THRESHOLD to threshold in the tencentdb_offload: block")
    assert proc.returncode == 1


def test_a_variable_in_lower_case_is_named_and_fixed(tmp_path, gateway):
    """`tencentdb_offload_threshold=0.6` in .env is another variable, never read: doctor passed."""
    home = setup_home(tmp_path, gateway, {"tencentdb_offload_threshold": "0.6"})
    proc = doctor(home)
    (bad,) = [c for c in checks(proc) if c["message"].startswith("tencentdb_offload_threshold ")]
    assert bad["status"] == "fail" and "did you mean TENCENTDB_OFFLOAD_THRESHOLD?" in bad["message"]
    assert proc.returncode == 1
    _bash(bad["fix"], home)
    assert "compaction at 60% of the window" in " ".join(c["message"] for c in checks(doctor(home)))


def test_a_misspelt_switch_names_its_default_as_one_writes_it(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_CANVS": "false",
                                          "TENCENTDB_OFFLOAD_STOR_DIR": "/x"})
    said = " ".join(c["message"] for c in checks(doctor(home)))
    assert "TENCENTDB_OFFLOAD_CANVAS is the default true)" in said, said
    assert "TENCENTDB_OFFLOAD_STORE_DIR is the default $HERMES_HOME/tencentdb-offload)" in said, said


def test_the_summary_counts_warnings(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_XYZZY_QUUX_WIBBLE": "1"})
    proc = run_cli(["doctor", "--timeout", "2"], env={"HERMES_HOME": str(home)})
    warned = sum(1 for line in proc.stdout.splitlines() if line.startswith("warn "))
    assert proc.returncode == 0 and warned >= 1
    assert proc.stdout.rstrip().splitlines()[-1] == "passed with %d warning%s" % (warned, "s" * (warned > 1))
    assert "all checks passed" not in proc.stdout
    fixed = [line for line in proc.stdout.splitlines() if "— fix: " in line]
    assert fixed and not [line for line in fixed if "  — fix" in line], "one space before the dash"


def test_a_fix_replaces_the_line_it_fixes(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_THRESHOLD": "75"})
    (bad,) = [c for c in checks(doctor(home)) if c["status"] == "fail"]
    assert "did you mean 0.75?" in bad["message"]
    _bash(bad["fix"], home)
    lines = [l for l in (home / ".env").read_text().splitlines() if "THRESHOLD" in l]
    assert lines == ["TENCENTDB_OFFLOAD_THRESHOLD=0.75"], lines
    assert not [c for c in checks(doctor(home)) if c["status"] == "fail"]


def test_a_url_without_a_scheme_gets_its_own_host_and_port_back(tmp_path, gateway):
    hostport = gateway.url.split("://", 1)[1]
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_GATEWAY_URL": hostport})
    bad = next(c for c in checks(doctor(home)) if c["status"] == "fail")
    assert "did you mean http://%s?" % hostport in bad["message"], bad
    assert "http://127.0.0.1:8420" not in bad["fix"] and "=http://%s" % hostport in bad["fix"], bad
    _bash(bad["fix"], home)
    after = checks(doctor(home))
    assert not [c for c in after if c["status"] == "fail"], after
    assert any(c["name"] == "gateway" and "accepted" in c["message"] for c in after)


@pytest.mark.default_port
def test_a_gateway_at_the_default_url_nobody_configured_is_a_warning(tmp_path):
    assert_serial_for_default_port(8420)
    try:
        gw = FakeGateway(port=8420).start()
    except OSError:
        pytest.skip("127.0.0.1:8420 is in use on this machine")
    try:
        home = setup_home(tmp_path, gw, {k: None for k in (
            "TENCENTDB_OFFLOAD_GATEWAY_URL", "TENCENTDB_OFFLOAD_API_KEY", "TENCENTDB_OFFLOAD_INSTANCE_ID")})
        items = [c for c in checks(doctor(home)) if c["name"] == "gateway"]
        text = " ".join(c["message"] for c in items)
        assert "Gateway at the default URL http://127.0.0.1:8420 (not configured)" in text
        (warn,) = [c for c in items if c["status"] == "warn"]
        assert "nobody configured" in warn["message"] and "=off" in warn["fix"]
        assert "the default key 'local' is a placeholder" in text
        status = run_cli(["status"], env={"HERMES_HOME": str(home)})
        assert "Gateway at the default URL http://127.0.0.1:8420 (not configured)" in status.stdout
    finally:
        gw.stop()


@pytest.mark.parametrize("case", ["bad setting value", "bad setting in config block", "gateway down",
                                  "plugin not enabled", "wrong engine name", "plugin not installed"])
def test_every_failure_prints_a_command(tmp_path, gateway, case):
    env, config, plugin, check, _needle = CASES[case]
    home = setup_home(tmp_path, gateway, env, config, plugin)
    (failed,) = [c for c in checks(doctor(home)) if c["status"] == "fail"]
    fix = failed["fix"]
    assert fix.split()[0] in ("hermes", "echo", "sed", "export", "start"), fix
    if fix.startswith(("echo", "sed")):                  # settings: the fix repairs it
        _bash(fix, home)
        assert not [c for c in checks(doctor(home)) if c["status"] == "fail"]
    if fix.startswith("hermes plugins install"):
        assert "--enable" in fix and "file://" in fix


def test_the_install_fix_names_a_url_even_for_a_clone_of_a_local_folder(tmp_path):
    from tencentdb_offload.ops.doctor import install_url
    clone = tmp_path / "tencentdb-offload"
    (clone / ".git").mkdir(parents=True)
    for remote, expected in (("/srv/repos/tdo", "file:///srv/repos/tdo"),
                             ("../tdo", (tmp_path / "tdo").resolve().as_uri()),
                             ("https://example.invalid/tdo.git", "https://example.invalid/tdo.git"),
                             ("git@example.invalid:org/tdo.git", "git@example.invalid:org/tdo.git")):
        (clone / ".git" / "config").write_text('[remote "origin"]\n\turl = %s\n' % remote)
        assert install_url(clone) == expected


def test_a_bad_store_dir_or_key_is_named_with_its_own_reason_and_a_fix_that_works(tmp_path, gateway):
    """The parser's words, not "must be a number"; a store fix that is an absolute path (not
    "off", a relative folder); a key that turns the Gateway off is the one named."""
    home = setup_home(tmp_path, gateway, env={"TENCENTDB_OFFLOAD_STORE_DIR": "~nosuchuser_tdo/x",
                                              "TENCENTDB_OFFLOAD_API_KEY": "k\u201cx"})
    items = checks(doctor(home))
    store = next(i for i in items if "STORE_DIR" in i["message"])
    assert "does not exist" in store["message"] and "number" not in store["message"]
    assert "TENCENTDB_OFFLOAD_STORE_DIR=/" in store["fix"], store
    gw = next(i for i in items if i["name"] == "gateway")
    assert gw["message"].startswith("Gateway off: TENCENTDB_OFFLOAD_API_KEY is invalid"), gw
    assert gw["fix"].startswith("sed -i -E ") and "|TENCENTDB_OFFLOAD_API_KEY=YOUR_KEY|" in gw["fix"], gw
    _bash(gw["fix"], home)
    assert "TENCENTDB_OFFLOAD_API_KEY=YOUR_KEY\n" in (home / ".env").read_text()


HOSTILE = "'$(>pwned)'"        # in a name, a value or a path: a fix that expands it creates the file


def test_every_fix_is_shell_safe_whatever_the_names_values_and_paths_hold(tmp_path, gateway):
    """A setting name holding `$(…)` went into doctor's `sed` fix as it was (and into
    `unset NAME` unquoted): pasting the fix ran the user's text as a command. Every name, value
    and path in a fix is one quoted word: the fixes run, rename what they name, and run nothing else."""
    dotenv_name = "TENCENTDB_OFFLOAD_THRESHOLD" + HOSTILE
    env_name = "TENCENTDB_OFFLOAD_COMPACT_RATIO" + HOSTILE
    home = setup_home(tmp_path, gateway, {dotenv_name: "0.6",
                                          "TENCENTDB_OFFLOAD_GATEWAY_URL": "127.0.0.1:1/" + HOSTILE})
    proc = run_cli(["doctor", "--json", "--timeout", "2"],
                   env={"HERMES_HOME": str(home), env_name: "0.4"}, cwd=home.parent)
    fixes = {c["message"].split(" in ")[0].split("=")[0]: c["fix"] for c in checks(proc)
             if c["name"] == "settings"}
    assert {dotenv_name, env_name, "TENCENTDB_OFFLOAD_GATEWAY_URL"} <= set(fixes), fixes
    for fix in fixes.values():
        assert fix.startswith(("sed", "echo", "unset", "export")), fix
        subprocess.run(["bash", "-c", fix], capture_output=True, text=True, timeout=30, cwd=str(home))
    assert not list(tmp_path.rglob("pwned")), fixes
    text = (home / ".env").read_text()
    assert dotenv_name not in text and "TENCENTDB_OFFLOAD_THRESHOLD=0.6\n" in text, text


def test_a_fix_on_a_home_whose_path_holds_shell_text_runs_nothing_else(tmp_path, gateway):
    """The .env path is one quoted word in every sed and echo fix."""
    odd = tmp_path / ("h" + HOSTILE.replace("/", ""))
    odd.mkdir()
    home = setup_home(odd, gateway, {"TENCENTDB_OFFLOAD_TRESHOLD": "0.6", "TENCENTDB_OFFLOAD_TRIM_CHARS": "x"})
    fixes = [c["fix"] for c in checks(doctor(home)) if c["name"] == "settings" and c["status"] == "fail"]
    assert len(fixes) == 2, fixes
    for fix in fixes:
        _bash(fix, home)
    assert not list(tmp_path.rglob("pwned")), fixes
    after = checks(doctor(home))
    assert not [c for c in after if c["name"] == "settings" and c["status"] == "fail"], after


def test_compression_keys_the_plugin_does_not_honour_are_named(tmp_path, gateway):
    # threshold and target_ratio set by the user; protect_last_n at the value Hermes 0.17/0.19
    # write into every config.yaml themselves (no warning for the host's own default)
    config = GOOD_CONFIG + ("compression:\n  enabled: true\n  threshold: 0.6\n  target_ratio: 0.3\n"
                            "  protect_last_n: 20\n"
                            "  hygiene_hard_message_limit: 400\n  micro_compact: true\n")
    home = setup_home(tmp_path, gateway, {}, config)
    proc = doctor(home)
    assert proc.returncode == 0, proc.stdout
    (warn,) = [c for c in checks(proc) if c["name"] == "config" and c["status"] == "warn"]
    assert "compression.threshold (use TENCENTDB_OFFLOAD_THRESHOLD)" in warn["message"]
    assert "compression.target_ratio (use TENCENTDB_OFFLOAD_COMPACT_RATIO)" in warn["message"]
    assert "compression.micro_compact" in warn["message"]
    assert "hygiene_hard_message_limit" not in warn["message"].split(":")[0]
    assert "protect_last_n" not in warn["message"]
    (home / "config.yaml").write_text(GOOD_CONFIG + "compression:\n  enabled: false\n")
    status = run_cli(["status"], env={"HERMES_HOME": str(home)})
    assert "compression.enabled is false" in status.stdout and "never calls the engine" in status.stdout


def test_on_0_22_the_fixes_are_config_commands_and_the_engine_is_said_to_load(tmp_path):
    """0.22 loads the engine named by context.engine from plugins/<name> without plugins.enabled
    (agent_init._select_context_engine → plugins.context_engine.load_context_engine), but the
    hooks and tools only when enabled; and its `plugins enable` refuses without network."""
    from tencentdb_offload.hermes.config import read_config
    from tencentdb_offload.ops.doctor import Checks, check_config
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(GOOD_CONFIG.replace("    - tencentdb-offload\n", "") +
                                      "  disabled:\n    - tencentdb-offload\n")
    for version, says, fix in (((0, 22, 2), "still loads the engine", "hermes config set plugins.enabled "
                                 "'[\"other-plugin\", \"tencentdb-offload\"]'"),
                               ((0, 19, 0), "silently uses its built-in compressor",
                                "hermes plugins enable tencentdb-offload")):
        c = Checks()
        check_config(c, read_config(home), version)
        failed = [i for i in c.items if i["status"] == "fail"]
        enabled = next(i for i in failed if "plugins.enabled" in i["message"])
        assert says in enabled["message"] and enabled["fix"] == fix, enabled
        gone = next(i for i in failed if "plugins.disabled" in i["message"])
        assert gone["fix"] == ("hermes config set plugins.disabled '[]'" if version >= (0, 22)
                               else "hermes plugins enable tencentdb-offload"), gone


def test_a_misspelt_name_is_never_followed_by_all_settings_valid(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_TRESHOLD": "0.6"})
    items = [c for c in checks(doctor(home)) if c["name"] == "settings"]
    assert [c["status"] for c in items] == ["fail", "pass"], items
    assert "all settings valid" not in items[1]["message"]
    assert "the settings in effect are valid" in items[1]["message"]
    _bash(items[0]["fix"], home)
    assert any("all settings valid: compaction at 60%" in c["message"] for c in checks(doctor(home)))


def test_a_relative_store_dir_gets_a_fix_that_works(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_STORE_DIR": "rel/store"})
    (failed,) = [c for c in checks(doctor(home)) if c["status"] == "fail"]
    assert "relative path" in failed["message"] and failed["fix"].startswith("sed"), failed
    _bash(failed["fix"], home)
    assert not [c for c in checks(doctor(home)) if c["status"] == "fail"]


def test_an_unreachable_gateway_names_the_proxy_the_plugin_does_not_use(tmp_path, gateway):
    """The plugin connects to the Gateway directly: where the environment sets a proxy for
    its URL, an unreachable Gateway may be one reachable only through it, and doctor says so;
    a host NO_PROXY exempts is not said to be proxied."""
    down = "http://127.0.0.1:%d" % unused_port()
    for n, (extra, said) in enumerate((({"HTTP_PROXY": "http://proxy.example:3128"}, "HTTP_PROXY"),
                                      ({"http_proxy": "http://p:1", "NO_PROXY": "127.0.0.1"}, None))):
        (tmp_path / str(n)).mkdir()
        home = setup_home(tmp_path / str(n), gateway, dict(extra, TENCENTDB_OFFLOAD_GATEWAY_URL=down))
        proc = doctor(home)
        gw = next(c for c in checks(proc) if c["name"] == "gateway" and c["status"] == "fail")
        if said:
            assert "%s is set, but the plugin connects directly" % said in gw["message"], gw
        else:
            assert "proxy" not in gw["message"].lower(), gw


def test_a_second_copy_hermes_loads_instead_fails_install(tmp_path, monkeypatch):
    """A backup beside the install (`cp -r tencentdb-offload tencentdb-offload.bak`) sorts
    last, and Hermes (0.19 and 0.22: later manifests of a name win) loads it, an old version;
    doctor passed 'installed at …/tencentdb-offload'. Its fix makes Hermes load the install."""
    from tencentdb_offload.ops.doctor import Checks, check_install
    home = tmp_path / "home"
    install(home)
    old = home / "plugins" / (NAME + ".bak")
    old.mkdir()
    (old / "__init__.py").write_text("")
    (old / "plugin.yaml").write_text("name: %s\nkind: standalone\nversion: 0.2.0\n" % NAME)
    monkeypatch.delenv("HERMES_ENABLE_PROJECT_PLUGINS", raising=False)
    c = Checks()
    check_install(c, home, ROOT)
    items = [i for i in c.items if i["name"] == "install"]
    assert [i["status"] for i in items] == ["fail"], items
    assert "loads the last one, %s (version 0.2.0)" % old in items[0]["message"], items
    _bash(items[0]["fix"], home)
    c = Checks()
    check_install(c, home, ROOT)
    assert [i["status"] for i in c.items] == ["pass"], c.items


def test_a_project_copy_wins_when_project_plugins_are_on(tmp_path, monkeypatch):
    from tencentdb_offload.ops.doctor import Checks, check_install
    home = tmp_path / "home"
    install(home)
    project = tmp_path / "proj" / ".hermes" / "plugins" / NAME
    project.mkdir(parents=True)
    (project / "plugin.yaml").write_text("name: %s\nkind: standalone\n" % NAME)
    monkeypatch.chdir(tmp_path / "proj")
    monkeypatch.delenv("HERMES_ENABLE_PROJECT_PLUGINS", raising=False)
    c = Checks()
    check_install(c, home, ROOT)
    assert [i["status"] for i in c.items] == ["pass"], c.items     # not scanned: no effect
    monkeypatch.setenv("HERMES_ENABLE_PROJECT_PLUGINS", "1")
    c = Checks()
    check_install(c, home, ROOT)
    assert [i["status"] for i in c.items] == ["fail"] and str(project) in c.items[0]["message"]


def test_enabled_false_in_dotenv_gets_a_fix_that_works(tmp_path, gateway):
    """ENABLED=false in $HERMES_HOME/.env: the fix was `export …=true`, which that file
    overrides (Hermes loads it over the environment), so doctor warned again after it."""
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_ENABLED": "false"})
    warned = [c for c in checks(doctor(home)) if "ENABLED is false" in c["message"]]
    assert len(warned) == 1, warned
    _bash(warned[0]["fix"], home)
    assert not [c for c in checks(doctor(home)) if "ENABLED is false" in c["message"]]
    assert str(home / ".env") in warned[0]["message"]       # where it was set


def test_plugins_enabled_as_a_bare_string_is_no_list_to_hermes(tmp_path):
    """`plugins.enabled: tencentdb-offload` (a hand edit, no dash): Hermes 0.17-0.22 read only a
    list there and list the plugin 'not enabled'; doctor passed 'contains tencentdb-offload'.
    A bare string under plugins.disabled disables nothing either."""
    from tencentdb_offload.hermes.config import read_config
    from tencentdb_offload.ops.doctor import Checks, check_config
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text("plugins:\n  enabled: tencentdb-offload\n  disabled: "
                                      "tencentdb-offload\ncontext:\n  engine: tencentdb-offload\n")
    for version, fix in (((0, 19, 0), "hermes plugins enable tencentdb-offload"),
                         ((0, 22, 2), "hermes config set plugins.enabled '[\"tencentdb-offload\"]'")):
        c = Checks()
        check_config(c, read_config(home), version)
        rows = [(i["status"], i["message"], i["fix"]) for i in c.items if "plugins." in i["message"]]
        assert len(rows) == 1 and rows[0][0] == "fail" and rows[0][2] == fix, rows
        assert 'it is the text "tencentdb-offload", not a list' in rows[0][1]


def _status(home: Path, *extra: str):
    return run_cli(["status"] + list(extra), env={"HERMES_HOME": str(home)}, cwd=home.parent)


def test_status_names_a_misspelt_setting_as_doctor_does(tmp_path, gateway):
    """`TENCENTDB_OFFLOAD_THRESHHOLD=0.6` in .env: doctor said "not a setting — did you mean
    THRESHOLD?", status said nothing while the default applied. Both say it, with one fix."""
    config = GOOD_CONFIG + "tencentdb_offload:\n  compact_ration: 0.3\n"
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_THRESHHOLD": "0.6"}, config)
    said = [c for c in checks(doctor(home)) if "not a setting" in c["message"]]
    assert len(said) == 2, said
    text = _status(home).stdout
    data = json.loads(_status(home, "--json").stdout)
    for c in said:
        assert "warning: %s (fix: %s)" % (c["message"], c["fix"]) in text, text
        assert "%s (fix: %s)" % (c["message"], c["fix"]) in data["warnings"], data["warnings"]


def test_a_decimal_comma_is_fixed_to_the_value_meant(tmp_path, gateway):
    """`THRESHOLD=0,7`: the fix wrote the default 0.75 back; the user meant 0.7."""
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_THRESHOLD": "0,7"})
    (bad,) = [c for c in checks(doctor(home)) if c["status"] == "fail"]
    assert "did you mean 0.7?" in bad["message"], bad
    _bash(bad["fix"], home)
    assert "TENCENTDB_OFFLOAD_THRESHOLD=0.7\n" in (home / ".env").read_text()


@pytest.mark.parametrize("suffix", ["/v1", "/v1/", "/V2/offload"])
def test_a_url_ending_in_an_api_path_gets_the_url_without_it(tmp_path, gateway, suffix):
    """`http://host:port/v1` (as OpenAI-style clients are configured) gave "health says 'None'
    (HTTP 404)" and the placeholder fix http://HOST:PORT; the fix is the URL without the suffix."""
    home = setup_home(tmp_path, gateway, {"TENCENTDB_OFFLOAD_GATEWAY_URL": gateway.url + suffix})
    (gw,) = [c for c in checks(doctor(home)) if c["name"] == "gateway" and c["status"] == "fail"]
    assert "the Gateway's URL is %s" % gateway.url in gw["message"], gw
    assert "HOST:PORT" not in gw["fix"], gw
    _bash(gw["fix"], home)
    after = [c for c in checks(doctor(home)) if c["name"] == "gateway"]
    assert after and all(c["status"] == "pass" for c in after), after


def test_redaction_off_is_a_warning_with_its_fix(tmp_path, gateway):
    for redact, status in (("false", "warn"), (None, "pass")):
        (tmp_path / str(redact)).mkdir()
        home = setup_home(tmp_path / str(redact), gateway, {"TENCENTDB_OFFLOAD_REDACT": redact})
        proc = doctor(home)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (row,) = [c for c in checks(proc) if c["name"] == "secrets"]
        assert row["status"] == status, row
        if redact == "false":
            assert "REDACT is off" in row["message"] and "TENCENTDB_OFFLOAD_REDACT=true" in row["fix"]
        else:
            assert "masked before they leave for the Gateway" in row["message"]
