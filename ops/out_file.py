"""Every file the command line writes (``report --out``, ``archive export --out``) goes through
``write_out``, which never destroys a file:

- it refuses the store's own files and any path into the store: ``store.db``, its ``-wal`` and
  ``-shm``, any other name in the store's folder, a symbolic link to one of them or into the
  folder, and a hard link to one of the store's files (the same inode under another name);
  and any SQLite database (Hermes' ``state.db``, hermes-lcm's ``lcm.db``, a copy of a store):
  a page or an export is never what one meant to put there;
- a regular file (or a new name) is written beside it, flushed to disk, and moved into place
  only when whole, so an interrupt or a full disk leaves the user's file as it was;
- a device, a FIFO or a link to one is written through, never replaced by a regular file
  (``--out /dev/null`` keeps /dev/null a device); a link to a file keeps its link: the file it
  points to is the one replaced."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Callable, IO, Iterable, Optional, TypeVar

from .env import CliError, resolve_settings

T = TypeVar("T")
SQLITE_MAGIC = b"SQLite format 3\x00"


def write_out(path: Path, fill: Callable[[IO[str]], T], stores: Iterable[Path],
              example: str = "") -> T:
    """``fill(stream)`` into ``path``; its result. ``stores``: the store folders the command
    reads; with the configured one (under ``--store`` they differ), nothing in them is ever
    written. A file replaced keeps its mode;
    a new one gets 0666 less the umask, as any file the user's shell creates. Errors are
    CliError that name ``path``, never the file beside it."""
    target = path.expanduser()
    if target.is_symlink():     # replace the file it points to, never the link (as `>` does)
        target = Path(os.path.realpath(str(target)))
    for store in list(stores) + [configured_store()]:
        why = _into_store(target, Path(store).expanduser())
        if why:
            raise CliError("refusing to write %s: %s; nothing was written, give a path outside "
                           "the store" % (path, why))
    if _is_database(target):
        raise CliError("refusing to write %s: it is a SQLite database; nothing was written, give "
                       "another file name" % path)
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
            out.flush()
            os.fsync(out.fileno())      # a full disk is an error here, not a short file later
        os.replace(str(partial), str(target))
        _sync_folder(folder)
        return result
    except OSError as exc:
        raise CliError("cannot write %s: %s (nothing was changed there)" % (path, exc.strerror or exc))
    finally:
        if partial.exists():
            partial.unlink()


def configured_store() -> Path:
    """The store the plugin writes with this HERMES_HOME and settings."""
    env, _config, settings, _warnings = resolve_settings()
    return settings.resolved_store_dir(env)


def _into_store(target: Path, store: Path) -> Optional[str]:
    """Why ``target`` is the store or in it (None when it is not): the store's folder or one of
    its ancestors by identity, not by name (a link to the folder, a bind mount), or a file that
    is one of the store's files under another name (a hard link)."""
    try:
        home = os.stat(str(store))
    except OSError:
        return None                     # no store there: nothing to protect
    place = Path(os.path.realpath(str(target)))
    for folder in [place] + list(place.parents):
        try:
            if os.path.samestat(os.stat(str(folder)), home):
                return "it is inside the store %s" % store
        except OSError:
            continue                    # a name not created yet
    try:
        mine = os.stat(str(place))
    except OSError:
        return None
    if not stat.S_ISREG(mine.st_mode) or mine.st_nlink < 2:
        return None
    try:
        names = os.listdir(str(store))
    except OSError:
        return None
    for name in names:
        try:
            if os.path.samestat(os.stat(str(store / name)), mine):
                return "it is a hard link to %s inside the store" % (store / name)
        except OSError:
            continue
    return None


def _is_database(target: Path) -> bool:
    """A regular file that starts as SQLite's do (a FIFO or device is never opened here)."""
    try:
        if not stat.S_ISREG(os.stat(str(target)).st_mode):
            return False
        with open(str(target), "rb") as f:
            return f.read(16) == SQLITE_MAGIC
    except OSError:
        return False


def _sync_folder(folder: Path) -> None:
    """The rename on disk too (best effort: some file systems refuse a folder's fsync)."""
    try:
        fd = os.open(str(folder), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _through(path: Path, target: Path, fill: Callable[[IO[str]], T]) -> T:
    try:
        with open(str(target), "w", encoding="utf-8") as out:
            return fill(out)
    except OSError as exc:
        raise CliError("cannot write %s: %s" % (path, exc.strerror or exc))
