"""Doctor's store checks: the store directory can be written, and what the outbox holds."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from shlex import quote
from typing import Any, Mapping

from ..archive import held, readonly, refused, repair
from ..hermes.config import hermes_home
from ..common.humanize import plural, printable
from ..status.render import store_figures

PASS, WARN, FAIL = "pass", "warn", "fail"


def _aside(db: Path) -> str:
    """Move a broken database out of the way (the plugin starts a new one)."""
    return "mv %s %s" % (quote(str(db)), quote("%s.broken" % db))


def _too_long(c: Any, directory: Path, env: Mapping[str, str]) -> bool:
    """SQLite cannot open a store there (every open fails with "unable to open database file")."""
    why = repair.path_too_long(directory / "store.db")
    if why:
        c.add("store", FAIL, "%s cannot hold the store: %s" % (directory, why),
              "echo TENCENTDB_OFFLOAD_STORE_DIR=/SHORTER/ABSOLUTE/DIR >> %s"
              % quote(str(hermes_home(env) / ".env")))
    return bool(why)


def _refused(c: Any, db: Path) -> bool:
    """The store cannot be read, or the plugin refuses it (a newer version's): said, True."""
    problem = readonly.problem(db)
    if problem:
        c.add("outbox", FAIL, problem, _aside(db))
        return True
    newer = readonly.newer(db)
    if newer:       # the plugin runs without an archive: recall answers with an error
        c.add("store", FAIL, newer, "hermes plugins update tencentdb-offload   # or: %s" % _aside(db))
    return bool(newer)


def check_store(c: Any, settings: Any, env: Mapping[str, str], plugin_dir: Path) -> None:
    directory = settings.resolved_store_dir(env)
    if _too_long(c, directory, env):
        return
    probe = directory
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if directory.is_dir():
        if os.access(str(directory), os.W_OK | os.X_OK):      # asked, not tried: doctor writes nothing
            c.add("store", PASS, "%s is writable" % directory)
        else:
            c.add("store", FAIL, "%s is not writable" % directory, "chmod u+rwx %s" % quote(str(directory)))
            return
    elif directory.exists():
        c.add("store", FAIL, "%s exists and is not a directory" % directory,
              "mv %s %s" % (quote(str(directory)), quote("%s.moved" % directory)))
        return
    elif os.access(str(probe), os.W_OK):
        c.add("store", PASS, "%s will be created on first use (%s is writable)" % (directory, probe))
        return
    else:
        c.add("store", FAIL, "%s cannot be created: %s is not writable" % (directory, probe),
              "mkdir -p %s   # as a user who may write there" % quote(str(directory)))
        return
    if readonly.unwritten(directory / "store.db"):
        c.add("outbox", PASS, "no store yet (nothing archived so far)")
        return
    if _refused(c, directory / "store.db"):
        return
    try:
        reader = readonly.StoreReader(directory)
        try:
            st = reader.stats()
            reasons = refused.refused_by_reason(reader.conn, 3) if st.outbox_dead else []
            kept = held.held_rows(reader.conn) if st.outbox_backlog else {"rows": 0}
        finally:
            reader.close()
    except sqlite3.Error as exc:  # a broken database is a finding, not a crash
        c.add("outbox", FAIL, "cannot read %s (%s)" % (directory / "store.db", exc),
              _aside(directory / "store.db"))
        return
    msg = store_figures(st)     # the words and figures status and the slash command print
    _outbox_line(c, settings, st, msg, reasons, plugin_dir, kept["rows"])
    if kept["rows"]:            # after the figures it is about
        _held(c, settings, kept, plugin_dir)


def _outbox_line(c: Any, settings: Any, st: Any, msg: str, reasons: Any, plugin_dir: Path,
                 held_rows: int) -> None:
    if st.outbox_dead:
        why = "; ".join("%s: %s" % (plural(r["rows"], "row"), printable(r["reason"], 200, False))
                        for r in reasons)
        c.add("outbox", WARN, "%s (%s)" % (msg, why),
              "%s   # after fixing the cause" % refused.requeue_command(plugin_dir))
    elif st.outbox_backlog and not settings.gateway_url:
        c.add("outbox", WARN, msg + " but the Gateway is off",
              "nothing to do: the archive keeps them; a Gateway URL in TENCENTDB_OFFLOAD_GATEWAY_URL "
              "would deliver them%s" % (" (the %s queued while no Gateway was configured only after "
                                         "%s)" % (plural(held_rows, "row"), held.commands(plugin_dir)[0])
                                        if held_rows else ""))
    elif st.outbox_backlog > 200:
        c.add("outbox", WARN, msg, "python3 %s status   # the Gateway is not keeping up or was down"
              % quote(str(plugin_dir)))
    else:
        c.add("outbox", PASS, msg)


def held_text(settings: Any, kept: Mapping[str, Any]) -> str:
    """What happens to the rows queued while no Gateway was configured, under these settings
    ('' when nothing is decided by them: the Gateway is off)."""
    what = "%s queued while no Gateway was configured (from %s, %s – %s)" % (
        plural(kept["rows"], "row"), plural(kept["sessions"], "session"), held.stamp(kept["oldest"]),
        held.stamp(kept["newest"]))
    if not settings.gateway_url:
        return ""
    if settings.gateway_configured:
        return ("%s: held, not sent to the Gateway at %s; they go to it only if you send them"
                % (what, settings.gateway_url))
    return ("%s: sent to whatever answers at the default URL %s; a Gateway you configure later "
            "gets them only if you send them" % (what, settings.gateway_url))


def _held(c: Any, settings: Any, kept: Mapping[str, Any], plugin_dir: Path) -> None:
    """The user's choice, shown before anything is sent: a warning where a configured Gateway
    waits for it, a line otherwise."""
    text = held_text(settings, kept)
    if not text:
        return
    send, drop = held.commands(plugin_dir)
    if settings.gateway_configured:
        c.add("outbox", WARN, text + " (its L1 summaries and canvas would then cover those sessions); "
              "or drop them from the queue (the archive keeps them)",
              "%s   # or, to keep them on this machine: %s" % (send, drop))
    else:
        c.add("outbox", PASS, text + " (%s), or drop them (%s)" % (send, drop))
