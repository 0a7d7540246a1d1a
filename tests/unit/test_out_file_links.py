"""``--out`` naming a symbolic link to a file (a page published through a link, a dotfile farm):
the file the link points to is replaced whole and the link stays, as a shell's ``>`` writes
through it. The link itself used to be replaced by a regular file, leaving the file it pointed
to as it was."""

from __future__ import annotations

import os

from test_cli import LOCAL, home, report_of, run_cli  # noqa: F401 (fixture)

from tencentdb_offload.ops.out_file import write_out


def test_a_link_to_a_file_is_written_through_and_kept(tmp_path):
    real = tmp_path / "www" / "report.html"
    real.parent.mkdir()
    real.write_text("old page")
    os.chmod(str(real), 0o640)
    link = tmp_path / "report.html"
    link.symlink_to(os.path.join("www", "report.html"))
    write_out(link, lambda out: out.write("new page"), [])
    assert link.is_symlink() and os.readlink(str(link)) == os.path.join("www", "report.html")
    assert real.read_text() == "new page"
    assert oct(real.stat().st_mode & 0o777) == oct(0o640)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html", "www"]
    assert sorted(p.name for p in real.parent.iterdir()) == ["report.html"]


def test_a_dangling_link_creates_the_file_it_names(tmp_path):
    (tmp_path / "www").mkdir()
    link = tmp_path / "new.html"
    link.symlink_to(os.path.join("www", "new.html"))
    write_out(link, lambda out: out.write("page"), [])
    assert link.is_symlink() and (tmp_path / "www" / "new.html").read_text() == "page"


def test_report_out_through_a_link(home, tmp_path):
    store = tmp_path / "kept"
    report_of(run_cli("demo", "--turns", "2", "--store", str(store), "--json", home=home, env=LOCAL))
    real = tmp_path / "published.html"
    real.write_text("old")
    link = tmp_path / "link.html"
    link.symlink_to(real)
    proc = run_cli("report", "--store", str(store), "--out", str(link), home=home, env=LOCAL)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and "<!DOCTYPE html>" in real.read_text(encoding="utf-8")
