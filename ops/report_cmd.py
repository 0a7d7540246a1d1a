"""``report``: write one conversation's picture (``report_html``) from the store to an HTML file.

Read-only on the store; the page is written as ``ops/out_file`` writes every file (whole or not at
all, never into the store).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..common.humanize import plural, printable
from .env import resolve_settings
from .out_file import write_out
from .report_data import NothingYet, figures
from .report_html import render_page

DEFAULT_OUT = "tencentdb-offload-report.html"


def add_parser(sub: Any) -> None:
    rp = sub.add_parser("report", help="one conversation as an HTML page (context per request, "
                        "compactions, what left)",
                        description="Write one self-contained HTML page (inline SVG, no script, "
                        "no network) of a conversation, read from the store: the context size of "
                        "every request against the window and the trigger, each compaction with "
                        "its level and before → after, the cached share per request where the "
                        "provider reports caching, and what left the context at each compaction with the "
                        "key to read it back (tdai_read_cos). The same records status and "
                        "/tencentdb-offload read.")
    rp.add_argument("conversation", nargs="?", metavar="CONVERSATION",
                    help="conversation (or Hermes session id) to draw (default: the newest)")
    rp.add_argument("--out", metavar="FILE", default=DEFAULT_OUT,
                    help="where to write the page (default: %s in the current directory)"
                         % DEFAULT_OUT)
    rp.add_argument("--store", metavar="DIR", help="store directory (default: the configured one)")
    rp.add_argument("--json", action="store_true",
                    help="also print the page's figures as JSON")


def cmd_report(args: argparse.Namespace) -> int:
    overrides = {"TENCENTDB_OFFLOAD_STORE_DIR": args.store} if args.store else {}
    env, _config, settings, _warnings = resolve_settings(overrides)
    try:
        store = settings.resolved_store_dir(env)
        fig = figures(store, settings, args.conversation)
    except NothingYet as exc:     # as status: nothing recorded yet is not an error
        print("%s; no page written" % exc)
        return 0
    page = render_page(fig)
    write_out(Path(args.out), lambda out: out.write(page), [store], DEFAULT_OUT)
    if args.json:
        print(json.dumps(dict(fig, out=str(Path(args.out).expanduser().resolve())),
                         ensure_ascii=False, indent=2, default=str))
    else:
        s = fig["summary"]
        print("wrote %s: conversation %s, %s, %s (open it in a browser)"
              % (Path(args.out).expanduser().resolve(), printable(fig["conversation"], 200, False),
                 plural(s["requests"], "request"), plural(s["compactions"], "compaction")))
    return 0
