"""For the ``report`` tests: run the CLI, keep a demo's store, read a page's figures."""

from __future__ import annotations

import json
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args: str, home: Path) -> subprocess.CompletedProcess:
    """The CLI in this process (``helpers.run_cli``), with ``HERMES_HOME`` set to ``home`` and
    the caller's settings dropped; ``tests/unit/test_cli.py`` runs ``report`` as a new process."""
    from helpers import run_cli as run_in_process
    return run_in_process(list(args), env={"HERMES_HOME": str(home)}, cwd=home.parent)


def json_of(proc: subprocess.CompletedProcess) -> Any:
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    return json.loads(proc.stdout)


def demo_store(tmp: Path, turns: int = 20) -> Dict[str, Any]:
    """A demo kept in ``tmp/store`` (a few compactions), its ``--json`` report, and the page."""
    home = tmp / "home"
    home.mkdir(parents=True, exist_ok=True)
    store = tmp / "store"
    demo = json_of(run_cli("demo", "--turns", str(turns), "--store", str(store), "--json", home=home))
    page = tmp / "page.html"
    proc = run_cli("report", "--out", str(page), "--store", str(store), home=home)
    assert proc.returncode == 0, proc.stderr
    return {"home": home, "store": store, "demo": demo, "page": page}


class Elements(HTMLParser):
    """Every element's tag and attributes, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.found: List[Dict[str, Any]] = []

    def handle_starttag(self, tag: str, attrs: List[Any]) -> None:
        self.found.append(dict(attrs, tag=tag))


def elements(page: Path, css_class: str) -> List[Dict[str, Any]]:
    parser = Elements()
    parser.feed(page.read_text(encoding="utf-8"))
    return [e for e in parser.found if css_class in (e.get("class") or "").split()]


def figures(page: Path) -> Dict[str, str]:
    """The summary's ``data-name`` → ``data-value``."""
    return {e["data-name"]: e["data-value"] for e in elements(page, "figure")}


def long_lived_store(directory: Path, requests: int, every: int, keys: int = 200,
                     session: str = "conv-long") -> None:
    """A store of one conversation of ``requests`` requests with a compaction after every
    ``every``-th (its ``keys`` keys recorded, as the plugin records up to 200), written in one
    transaction. Sizes rise towards the trigger and fall at each compaction; the compaction
    after request ``i`` saves ``i % 997`` + 60,000 tokens, so the ones that saved most are known."""
    import sqlite3
    import time
    from tencentdb_offload.archive.store import Store
    Store(directory).close()
    start, rows = time.time() - 10 * requests, []
    for i in range(requests):
        rows.append((start + i, session, "request", json.dumps({
            "prompt_tokens": 20_000 + (i % every) * 90_000 // every, "context_length": 128_000,
            "threshold_tokens": 108_800, "cache_read_tokens": 10_000})))
        if i % every == every - 1:
            rows.append((start + i + 0.5, session, "compaction", json.dumps({
                "route": "gateway", "level": "mild", "tokens_before": 110_000 + i % 997,
                "tokens_after": 50_000, "target": 57_600, "archived": keys, "trigger": 108_800,
                "context_length": 128_000, "left": ["call_%d_%d" % (i, k) for k in range(keys)]})))
    conn = sqlite3.connect(str(directory / "store.db"))
    with conn:
        conn.executemany("INSERT INTO events(ts,session,kind,data) VALUES (?,?,?,?)", rows)
    conn.close()
