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


# --- issue 53, item 9: the threshold, the wording, no store, LCM-X's names ----------------

def _doc_switch_block() -> str:
    import re
    from pathlib import Path
    doc = (Path(__file__).resolve().parents[2] / "docs" / "switching-from-lcm.md").read_text(encoding="utf-8")
    return re.findall(r"```bash\n(.*?)```", doc, re.S)[0]


def test_the_documented_switch_names_no_threshold_doctor_carries_the_users(tmp_path, gateway):
    # pasting the section's block must not replace the user's LCM threshold by a value of the
    # page's: the block names none, and doctor's row is the one place the value comes from
    assert "threshold" not in _doc_switch_block()
    home = setup_home(tmp_path, gateway, env={"LCM_CONTEXT_THRESHOLD": "0.7"}, config=HALF_DONE)
    row = next(r for r in lcm_rows(doctor(home)) if "LCM_CONTEXT_THRESHOLD" in r["message"])
    assert row["status"] == "warn" and row["fix"] == "hermes config set tencentdb_offload.threshold 0.7"


def test_lcm_config_block_threshold_is_carried_too(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, config=HALF_DONE + "lcm:\n  context_threshold: 0.6\n")
    row = next(r for r in lcm_rows(doctor(home)) if "lcm.context_threshold" in r["message"])
    assert row["status"] == "warn" and row["fix"] == "hermes config set tencentdb_offload.threshold 0.6"


def test_a_threshold_under_the_ratio_comes_with_a_ratio_that_fits(tmp_path, gateway):
    # LCM-X's default trigger (0.35) is under this plugin's COMPACT_RATIO (0.45): the threshold
    # alone would be an invalid pair (doctor would then fail on it)
    from tencentdb_offload.settings.config import load_settings
    home = setup_home(tmp_path, gateway, env={"LCM_CONTEXT_THRESHOLD": "0.35"}, config=HALF_DONE)
    row = next(r for r in lcm_rows(doctor(home)) if "LCM_CONTEXT_THRESHOLD" in r["message"])
    assert row["fix"] == ("hermes config set tencentdb_offload.threshold 0.35 && "
                          "hermes config set tencentdb_offload.compact_ratio 0.23"), row
    _settings, warnings = load_settings({}, {"threshold": "0.35", "compact_ratio": "0.23"})
    assert warnings == []


def test_the_same_threshold_is_nothing_to_carry_over(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, env={"LCM_CONTEXT_THRESHOLD": "0.75"}, config=HALF_DONE)
    row = next(r for r in lcm_rows(doctor(home)) if "LCM_CONTEXT_THRESHOLD" in r["message"])
    assert row["status"] == "pass" and "nothing to carry over" in row["message"]


def test_the_plugins_row_says_what_the_list_holds(tmp_path, gateway):
    without = HALF_DONE.replace("    - tencentdb-offload\n", "")
    home = setup_home(tmp_path, gateway, config=without)
    row = next(r for r in lcm_rows(doctor(home)) if "plugins.enabled" in r["message"])
    assert "beside tencentdb-offload" not in row["message"], row
    assert "and not tencentdb-offload" in row["message"] and '["other-plugin", "hermes-lcm"]' in row["message"]
    (tmp_path / "2").mkdir()
    with_it = next(r for r in lcm_rows(doctor(setup_home(tmp_path / "2", gateway, config=HALF_DONE)))
                   if "plugins.enabled" in r["message"])
    assert "beside tencentdb-offload" in with_it["message"]


def test_no_lcm_db_says_where_it_looked(tmp_path, gateway):
    home = setup_home(tmp_path, gateway, config=HALF_DONE)
    row = next(r for r in lcm_rows(doctor(home)) if "lcm store" in r["message"])
    assert row["status"] == "pass" and "no hermes-lcm store found" in row["message"]
    assert str(home / "lcm.db") in row["message"] and "LCM_DATABASE_PATH is not set" in row["message"]
    elsewhere = tmp_path / "kept" / "lcm.db"
    (tmp_path / "2").mkdir()
    row = next(r for r in lcm_rows(doctor(setup_home(tmp_path / "2", gateway, config=HALF_DONE,
                                                     env={"LCM_DATABASE_PATH": str(elsewhere)})))
               if "lcm store" in r["message"])
    assert str(elsewhere) in row["message"] and "LCM_DATABASE_PATH names it" in row["message"]


def test_lcm_x_names_are_known(tmp_path, gateway):
    # LCM-X v0.24 renamed its plugin hermes-lcm-x and its engine lcm-x
    config = GOOD_CONFIG.replace("engine: tencentdb-offload", "engine: lcm-x").replace(
        "    - other-plugin\n", "    - other-plugin\n    - hermes-lcm-x\n")
    rows = lcm_rows(doctor(setup_home(tmp_path, gateway, config=config)))
    assert any(r["status"] == "fail" and "'lcm-x'" in r["message"] for r in rows), rows
    listed = next(r for r in rows if "plugins.enabled" in r["message"])
    assert "hermes-lcm-x" in listed["message"] and "hermes-lcm-x" not in listed["fix"]


# --- issue 53, a newcomer's walk: fixes that work on the Hermes on PATH -----------------------

def _lcm_rows_for(tmp_path, config: str, version, env=None):
    from tencentdb_offload.hermes.config import read_config
    from tencentdb_offload.hermes.releases import of_release
    from tencentdb_offload.ops.doctor_lcm import lcm_checks
    from tencentdb_offload.settings.config import load_settings
    home = tmp_path / ("home-%s" % (version,))
    home.mkdir(parents=True)
    (home / "config.yaml").write_text(config)
    return lcm_checks(dict(env or {}, HERMES_HOME=str(home)), read_config(home),
                      load_settings({})[0], home, of_release(version))


def test_the_plugins_fix_is_one_the_hermes_on_path_keeps_as_a_list(tmp_path):
    """A Hermes whose `hermes config set` stores a list as text (docs/switching-from-lcm.md,
    step 3; seen on 0.19: doctor's config row then fails) gets `hermes plugins disable` /
    `enable`; one whose plugin commands need network keeps the config.yaml edit."""
    without = HALF_DONE.replace("    - tencentdb-offload\n", "")
    for config, enable in ((HALF_DONE, False), (without, True)):
        rows = _lcm_rows_for(tmp_path / str(enable), config, (0, 19, 0))
        fix = next(r for r in rows if "plugins.enabled" in r["message"])["fix"]
        assert "hermes config set plugins.enabled" not in fix, fix
        assert "hermes plugins disable hermes-lcm" in fix, fix
        assert ("hermes plugins enable tencentdb-offload" in fix) == enable, fix
    rows = _lcm_rows_for(tmp_path / "offline", HALF_DONE, (0, 22, 2))
    fix = next(r for r in rows if "plugins.enabled" in r["message"])["fix"]
    assert fix.startswith("hermes config set plugins.enabled "), fix


def test_the_threshold_row_names_the_trigger_the_host_applies(tmp_path):
    """On a host with the small-window floor, "this plugin compacts at 0.75 of the window"
    was not so on a 64K-85K window (90 %): the row says it as the settings row does."""
    from tencentdb_offload.settings.config import load_settings
    from tencentdb_offload.settings.thresholds import applying_trigger
    applied = applying_trigger(load_settings({})[0], 64_000, host_floor=True)
    rows = _lcm_rows_for(tmp_path, HALF_DONE, (0, 22, 2), env={"LCM_CONTEXT_THRESHOLD": "0.6"})
    row = next(r for r in rows if "LCM_CONTEXT_THRESHOLD" in r["message"] and r["status"] == "warn")
    assert "%.0f%% of a 64K-85K window" % (applied.ratio * 100) in row["message"], row
    assert row["fix"] == "hermes config set tencentdb_offload.threshold 0.6"
