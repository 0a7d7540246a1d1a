"""``report``'s one line after writing the page counts in words: "1 compaction", never
"1 compactions" (the demo kept here compacts exactly once)."""

from __future__ import annotations

from test_cli import LOCAL, home, report_of, run_cli  # noqa: F401 (fixture)


def test_one_compaction_is_said_in_the_singular(home, tmp_path):
    store = tmp_path / "kept"
    demo = report_of(run_cli("demo", "--turns", "8", "--context-length", "64000", "--store",
                             str(store), "--json", home=home, env=LOCAL))
    assert demo["summary"]["compactions"] == 1, "the demo must compact once for this test"
    proc = run_cli("report", "--store", str(store), "--out", str(tmp_path / "r.html"),
                   home=home, env=LOCAL)
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.strip()
    assert ", 1 compaction (open it" in line, line
