"""The installation's seal key (``context/provenance.py``), kept beside the store.

Created once with owner-only permissions; every process and agent of one store shares it, so a
notice written by one ``--resume`` process is recognised by the next. Unreadable or unwritable:
a per-process key, which only costs recognising earlier processes' blocks (they are kept).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Tuple

from ..context.provenance import Seal

KEY_FILE = "seal.key"


def load_seal(directory: Path) -> Tuple[Seal, str]:
    """(seal, problem); problem is "" when the key file was read or created."""
    path = Path(directory) / KEY_FILE
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():               # write aside, then link: readers never see half a key
            _write_key(path, replace=False)
        raw = path.read_text(encoding="ascii").strip()
        if not raw:                         # a crash left the file, not its bytes: make it again
            raw = _remade(path)
        return Seal(bytes.fromhex(raw)), ""
    except (OSError, ValueError, ImportError) as exc:     # ImportError: no fcntl (Windows)
        return Seal.ephemeral(), "seal key %s unusable (%s): this process cannot recognise " \
                                 "blocks written by earlier ones" % (KEY_FILE, exc)


def _write_key(path: Path, replace: bool) -> None:
    """A new key at ``path``, on disk before it has its name (a crash right after leaves a
    whole key or none). ``replace=False``: another process's key, if it won the race, stays."""
    tmp = path.with_name("%s.%d.tmp" % (KEY_FILE, os.getpid()))
    fd = os.open(str(tmp), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:                                    # a full disk must not leave the half key behind
        with os.fdopen(fd, "wb") as out:
            out.write(os.urandom(32).hex().encode("ascii"))
            out.flush()
            os.fsync(out.fileno())
        if replace:
            os.replace(str(tmp), str(path))
        else:
            os.link(str(tmp), str(path))    # fails if another process won the race
    except FileExistsError:
        pass
    finally:
        if os.path.lexists(str(tmp)):
            os.unlink(str(tmp))


def _remade(path: Path) -> str:
    """An empty key file replaced, once for every process: under a lock, and only while it is
    still empty (another process may have remade it meanwhile). Blocks sealed with the lost key
    are not recognised; every later one is, in every process."""
    import fcntl
    with open(str(path.with_name(KEY_FILE + ".lock")), "a") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if not path.read_text(encoding="ascii").strip():
            _write_key(path, replace=True)
        return path.read_text(encoding="ascii").strip()


def read_seal(directory: Path) -> Optional[Seal]:
    """The installation's seal, read only (for the CLI, which never writes): None when there
    is no usable key, so nothing reads as the plugin's own text."""
    try:
        raw = (Path(directory) / KEY_FILE).read_text(encoding="ascii").strip()
        return Seal(bytes.fromhex(raw))
    except (OSError, ValueError):
        return None
