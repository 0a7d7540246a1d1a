"""``--out FILE`` of ``report`` and ``archive export``: a regular file (or a new name) is
written beside it and moved into place only when whole, so an interrupt or a full disk leaves
the user's file as it was; a device, a FIFO or a link to one is written through, never
replaced by a regular file (``--out /dev/null`` keeps /dev/null a device); a link to a file keeps
its link: the file it points to is the one replaced."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable, IO, TypeVar

from .env import CliError

T = TypeVar("T")


def write_out(path: Path, fill: Callable[[IO[str]], T], example: str = "") -> T:
    """``fill(stream)`` into ``path``; its result. A file replaced keeps its mode; a new one
    gets 0666 less the umask, as any file the user's shell creates. Errors are CliError that
    name ``path``, never the file beside it."""
    target = path.expanduser()
    if target.is_symlink():     # replace the file it points to, never the link (as `>` does)
        target = Path(os.path.realpath(str(target)))
    if target.is_dir():
        raise CliError("--out %s is a directory; give a file name%s"
                       % (path, " such as %s" % (target / example) if example else ""))
    if target.exists() and not target.is_file():
        return _through(path, target, fill)
    folder = target.parent
    if not folder.is_dir():
        raise CliError("cannot write %s: the folder %s does not exist" % (path, folder))
    partial = folder / (".%s.partial-%d-%s" % (target.name, os.getpid(), os.urandom(4).hex()))
    try:
        fd = os.open(str(partial), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)   # umask applies
    except OSError as exc:
        raise CliError("cannot write %s: %s" % (path, exc.strerror or exc))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            if target.is_file():        # a replaced file keeps its mode
                os.fchmod(out.fileno(), stat.S_IMODE(os.stat(str(target)).st_mode))
            result = fill(out)
        os.replace(str(partial), str(target))
        return result
    except OSError as exc:
        raise CliError("cannot write %s: %s (nothing was changed there)" % (path, exc.strerror or exc))
    finally:
        if partial.exists():
            partial.unlink()


def _through(path: Path, target: Path, fill: Callable[[IO[str]], T]) -> T:
    try:
        with open(str(target), "w", encoding="utf-8") as out:
            return fill(out)
    except OSError as exc:
        raise CliError("cannot write %s: %s" % (path, exc.strerror or exc))
