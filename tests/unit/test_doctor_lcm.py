"""doctor on a home switching from hermes-lcm: ``context.engine: lcm`` fails with the fix, LCM
still enabled beside this plugin warns, LCM_* leftovers are named, the store is reported; the
switched home has no LCM failure or warning."""

from __future__ import annotations

from fakes import lcm_store

from test_cli_doctor import GOOD_CONFIG, checks, doctor, gateway, setup_home  # noqa: F401 (fixture)

HALF_DONE = GOOD_CONFIG.replace("engine: tencentdb-offload", "engine: lcm").replace(
    "    - other-plugin\n", "    - other-plugin\n    - hermes-lcm\n")
SWITCHED = GOOD_CONFIG + "tencentdb_offload:\n  threshold: 0.6\n"
LEFTOVERS = {"LCM_FRESH_TAIL_COUNT": "32", "LCM_CONTEXT_THRESHOLD": "0.6"}


def lcm_rows(proc):
    return [c for c in checks(proc) if c["name"] == "lcm"]


def test_half_done_switch_fails_and_warns_with_fixes(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, env=LEFTOVERS, config=HALF_DONE)
    lcm_store.build(home / "lcm.db", rows=600)
    proc = doctor(home)
    assert proc.returncode == 1
    rows = lcm_rows(proc)
    engine = next(r for r in rows if "context.engine" in r["message"])
    assert engine["status"] == "fail" and engine["fix"] == "hermes config set context.engine tencentdb-offload"
    both = next(r for r in rows if "plugins.enabled" in r["message"])
    assert both["status"] == "warn" and "hermes-lcm" in both["message"]
    assert "hermes-lcm" not in both["fix"] and "other-plugin" in both["fix"] and "tencentdb-offload" in both["fix"]
    threshold = next(r for r in rows if "LCM_CONTEXT_THRESHOLD" in r["message"] and r["status"] == "warn")
    assert threshold["fix"] == "hermes config set tencentdb_offload.threshold 0.6"
    assert any("LCM_FRESH_TAIL_COUNT" in r["message"] and "ignores" in r["message"] for r in rows)
    store = next(r for r in rows if "hermes-lcm store" in r["message"])
    assert store["status"] == "pass" and "601 messages in 3 sessions" in store["message"]
    assert "read-only" in store["message"]


def test_switched_home_has_no_lcm_problem(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, env=LEFTOVERS, config=SWITCHED)
    lcm_store.build(home / "lcm.db", rows=60)
    proc = doctor(home)
    assert proc.returncode == 0, proc.stdout
    assert [r for r in lcm_rows(proc) if r["status"] != "pass"] == []


def test_broken_store_is_a_warning_not_a_crash(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, config=SWITCHED)
    (home / "lcm.db").write_bytes(b"SQLite format 3\0" + b"\x00" * 5000)
    proc = doctor(home)
    rows = lcm_rows(proc)
    assert proc.returncode == 0 and rows[0]["status"] == "warn", proc.stdout + proc.stderr
    assert rows[0]["message"].startswith("LCM history unavailable: ")


def test_no_trace_of_lcm_no_rows(tmp_path, gateway):
    assert lcm_rows(doctor(setup_home(tmp_path, gateway))) == []


def test_the_enable_fix_does_not_put_hermes_lcm_back(tmp_path):
    # 0.22, hermes-lcm still listed and this plugin not: the lcm row says drop hermes-lcm, so
    # the plugins.enabled fix must not list it again (two fixes that undo each other)
    from tencentdb_offload.hermes.config import read_config
    from tencentdb_offload.ops.doctor import Checks, check_config
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.yaml").write_text(HALF_DONE.replace("    - tencentdb-offload\n", ""))
    c = Checks()
    check_config(c, read_config(home), (0, 22, 2))
    enabled = next(i for i in c.items if "plugins.enabled" in i["message"] and i["status"] == "fail")
    assert enabled["fix"] == "hermes config set plugins.enabled '[\"other-plugin\", \"tencentdb-offload\"]'"
