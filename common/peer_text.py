"""Where peer text leaves the plugin: every CLI line and every log record made printable.

Tool-call ids, conversation ids, config keys and the Gateway's words (a level, a refusal)
are written by others; an ESC or BEL in them must not reach the operator's terminal or a
log file raw (ESC clears the screen, fakes a prompt or a log line). Rather than wrapping
each value where it is formatted (one missed call site is enough), the CLI's output streams
and the plugin's loggers pass everything through ``humanize.printable`` here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any, Iterator

from .humanize import printable


# what ``printable`` removes, as JSON escapes: in JSON output such a character can only be
# inside a string (the syntax is ASCII), where ``\u009b`` means the same as the raw one
_JSON_ESCAPES = {c: "\\u%04x" % c for c in list(range(0xA0)) + list(range(0x2000, 0x2070))
                 if not printable(chr(c))}


class OutputError(Exception):
    """The CLI's own output could not be written (a full disk, a file size limit): the
    operator's problem to fix, not a bug of the command."""


class PrintableStream:
    """A text stream whose writes reach the terminal without control characters (newlines
    and tabs stay: they are the CLI's own layout). ``json=True``: the output is JSON (data),
    so they are escaped instead of removed and every value reads back unchanged."""

    def __init__(self, raw: Any, json: bool = False, name: str = "standard output") -> None:
        self._raw = raw
        self._json = json
        self._name = name

    def write(self, text: str) -> int:
        self._guarded("write", text.translate(_JSON_ESCAPES) if self._json else printable(text))
        return len(text)

    def flush(self) -> None:
        self._guarded("flush")

    def _guarded(self, method: str, *args: Any) -> None:
        if self._raw is None:       # started with the descriptor closed (``>&-``)
            raise OutputError("cannot write %s: it is closed" % self._name)
        try:
            getattr(self._raw, method)(*args)
        except BrokenPipeError:     # the reader left (``| head``): not a failure to report,
            self._reader_left()     # and the command still ends with its own verdict
        except OSError as exc:
            raise OutputError("cannot write %s: %s" % (self._name, exc.strerror or exc)) from exc

    def _reader_left(self) -> None:
        # The rest goes to /dev/null, the descriptor itself too, so what is still buffered
        # (flushed again at exit) cannot fail once more: ``doctor | head -1`` under
        # ``pipefail`` exits 1 when a check failed, 0 when all passed.
        try:
            sink = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(sink, self._raw.fileno())
            finally:
                os.close(sink)
            getattr(self._raw, "flush")()
        except (OSError, ValueError, AttributeError):   # no descriptor: stop writing instead
            self._raw = open(os.devnull, "w", encoding="utf-8")

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:      # flush, isatty, encoding, fileno ...
        return getattr(self._raw, name)


@contextlib.contextmanager
def printable_output(json_stdout: bool = False) -> Iterator[None]:
    """While it lasts, what is printed is printable (stdout's control characters escaped
    when it carries JSON); the streams are restored after."""
    saved = sys.stdout, sys.stderr
    sys.stdout = PrintableStream(sys.stdout, json=json_stdout)     # type: ignore[assignment]
    sys.stderr = PrintableStream(sys.stderr, name="standard error")   # type: ignore[assignment]
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


class PrintableRecords(logging.Filter):
    """Makes a record's message printable on one line (a newline would fake a record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:           # a bad format: let logging report it as it does
            return True
        record.msg, record.args = printable(message, newlines=False), None
        if record.exc_info and not record.exc_text:     # the traceback quotes the error text
            record.exc_text = printable(_TRACEBACKS.formatException(record.exc_info))
        return True


_TRACEBACKS = logging.Formatter()
_FILTER = PrintableRecords()


def plugin_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` whose records are printable whatever the peer wrote."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
