"""Logging set-up for the CLI: plain lines on stderr, secrets masked and control
characters escaped on the way out."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator

from pipelines.secrets import redact

from .safe_text import terminal_text


class LazySecrets:
    """Secret values to mask: those `lookup` returns, looked up on first use, and those
    added later. A command that logs nothing and fails in no way never looks them up
    (the CLI's lookup imports the source package to read dlt's config: about 0.6 s of
    start-up)."""

    def __init__(self, lookup: Callable[[], Iterable[str | None]]) -> None:
        self._lookup = lookup
        self._found: tuple[str, ...] | None = None
        self._added: list[str] = []

    def add(self, value: str) -> None:
        self._added.append(value)

    def __iter__(self) -> Iterator[str]:
        if self._found is None:
            self._found = tuple(value for value in self._lookup() if value)
        return iter((*self._found, *self._added))


class SecretMaskingFilter(logging.Filter):
    """Masks secrets in every record that passes the handler it is attached to."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        self.secrets = secrets

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message, self.secrets)
        if masked != message:
            record.msg, record.args = masked, None
        return True


class TerminalTextFilter(logging.Filter):
    """Shows the control characters of every record's message as `\\xNN` (see
    :func:`diligence.safe_text.terminal_text`): upstream text quoted in a log line can
    neither send escape sequences to the terminal nor forge a second log line."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        shown = terminal_text(message)
        if shown != message:
            record.msg, record.args = shown, None
        return True


class LoadJobRetryFilter(logging.Filter):
    """Drops dlt's records of a load job it retries or gives up on ("Transient exception
    in job ...", "Job for ... retried in load ...", "Job for ... failed terminally ..."),
    each a traceback of dozens of lines. dlt retries the job itself; a load that fails
    after all is the step's one `error:` line, naming the statement that failed."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Transient exception in job ", "Job for "))


#: `verbosity` of :func:`configure_logging`
QUIET, NORMAL, VERBOSE = -1, 0, 1


def configure_logging(
    *, debug: bool = False, secrets: Iterable[str] = (), verbosity: int = NORMAL
) -> None:
    """Log to stderr: `diligence.*` (ours, the client's too) at INFO, dlt at WARNING.

    `verbosity` QUIET logs errors only; VERBOSE logs ours at DEBUG (each request and
    retry of the client, per-namespace progress), dlt still at WARNING; `debug` logs
    ours at DEBUG and dlt at INFO. dlt's retries of its load jobs (a traceback each) show
    only with VERBOSE or `debug` (:class:`LoadJobRetryFilter`). Secrets are masked in
    every record either way.
    """
    # a log that cannot be written (dbt's dbt.log on a full disk) is no traceback on
    # stderr: the step's own error says what went wrong, in one line (--debug: shown)
    logging.raiseExceptions = debug
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.addFilter(SecretMaskingFilter(secrets))
    handler.addFilter(TerminalTextFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.ERROR if verbosity == QUIET and not debug else logging.WARNING)
    ours = logging.INFO
    if debug or verbosity == VERBOSE:
        ours = logging.DEBUG
    elif verbosity == QUIET:
        ours = logging.ERROR
    logging.getLogger("diligence").setLevel(ours)
    dlt_logger = logging.getLogger("dlt")
    dlt_logger.setLevel(logging.INFO if debug else logging.WARNING if verbosity != QUIET else logging.ERROR)
    for old in [f for f in dlt_logger.filters if isinstance(f, LoadJobRetryFilter)]:
        dlt_logger.removeFilter(old)
    if not debug and verbosity != VERBOSE:  # --verbose and --debug show dlt's job retries
        dlt_logger.addFilter(LoadJobRetryFilter())
    for noisy in ("httpx", "httpcore", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
