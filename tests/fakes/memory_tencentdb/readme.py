"""Read the "With memory_tencentdb" section of docs/memory_tencentdb.md as a test runs it: its
config.yaml block, its .env variables and the install directory its ``cp`` command names
(relative to $HERMES_HOME)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List

HEADING = "## With memory_tencentdb"
FIXTURE = Path(__file__).resolve().parents[3] / "docs" / "memory_tencentdb.md"
_FENCE = re.compile(r"^[ \t]*```(\w*)[ \t]*\n(.*?)^[ \t]*```", re.S | re.M)
_ASSIGN = re.compile(r"^([A-Z][A-Z0-9_]*)=(.*)$")
_HOME_PREFIX = '"${HERMES_HOME:-$HOME/.hermes}/'


@dataclass
class Section:
    config: Dict[str, Any]       # the yaml block
    env: Dict[str, str]          # the .env block
    install_dir: str             # where the cp command puts the provider, relative to $HERMES_HOME


def section_text(readme: str) -> str:
    """The section from its heading to the next ``## `` heading."""
    start = readme.index(HEADING)
    nxt = readme.find("\n## ", start + len(HEADING))
    return readme[start:] if nxt < 0 else readme[start:nxt]


def _blocks(text: str) -> List[tuple]:
    out = []
    for lang, body in _FENCE.findall(text):
        lines = [l.strip() for l in body.splitlines() if l.strip()]
        out.append((lang, lines))
    return out


def parse(readme: str, yaml_load: Any) -> Section:
    """``yaml_load`` parses the yaml block (PyYAML's safe_load, or the plugin's mini_yaml)."""
    text = section_text(readme)
    blocks = _blocks(text)
    (yaml_body,) = [body for lang, body in _FENCE.findall(text) if lang == "yaml"]
    (env_lines,) = [lines for lang, lines in blocks if lang == "sh" and all(_ASSIGN.match(l) for l in lines)]
    (cp_lines,) = [lines for lang, lines in blocks if lang == "sh" and lines[0].startswith("cp ")]
    target = " ".join(l.rstrip("\\").strip() for l in cp_lines).split()[-1]
    assert target.startswith(_HOME_PREFIX) and target.endswith('"'), target
    return Section(config=yaml_load(_dedent(yaml_body)),
                   env=dict(_ASSIGN.match(l).groups() for l in env_lines),
                   install_dir=target[len(_HOME_PREFIX):-1])


def _dedent(body: str) -> str:
    lines = body.splitlines()
    indent = min(len(l) - len(l.lstrip()) for l in lines if l.strip())
    return "\n".join(l[indent:] for l in lines) + "\n"
