"""``WorkshopError``: the one base of every failure the workshop library raises on purpose, and the few
kinds of it a caller tells apart.

Each such error's message says what to do next (set a value, run an earlier notebook, ask for a
quota, wait and retry). Callers tell them from bugs with one ``except WorkshopError``: the command
line prints the message in one line and the notebooks show it without a traceback, while any other
exception is a bug and keeps its traceback. Each module's own classes keep a built-in base as well
(``ValueError`` for bad input, ``RuntimeError`` for a failed step, ``TimeoutError`` for waits), so
``except ValueError`` around a parser goes on working.

The kinds: ``InvalidInput`` (a value or setting the workshop cannot use; also ``ValueError``),
``StepError`` / ``StepNotRun`` (a step that cannot run yet), ``AwsFailure`` (an AWS call, build or
wait that failed; also ``RuntimeError``), ``WorkshopTimeout`` (a wait that ran out; also
``TimeoutError``) and ``EndpointError`` (an invocation without a usable answer, with its HTTP status).
This module imports nothing from the library, so every layer, the benchmark included, can use them.
"""

from __future__ import annotations


class WorkshopError(Exception):
    """An expected failure; the message names what went wrong and what to do about it."""


class StepError(WorkshopError, RuntimeError):
    """A workshop step cannot run yet; the message says which notebook or setting comes first."""


class StepNotRun(StepError):
    """What an earlier notebook makes is missing: ``what`` names it, ``notebook`` is the one to run.

    Shown in one line: ``<what>: run notebook <notebook> first``. ``notebook`` is the notebook's file
    name without ``.ipynb`` (``01_package_model``), so the line names exactly what to open.
    """

    def __init__(self, notebook: str, what: str):
        self.notebook, self.what = notebook, what
        super().__init__(f"{what}: run notebook {notebook} first")

    # pickles (pytest-xdist, multiprocessing) with both fields
    def __reduce__(self) -> tuple[type[StepNotRun], tuple[str, str]]:
        return type(self), (self.notebook, self.what)


class InvalidInput(WorkshopError, ValueError):
    """A value, setting or file the workshop cannot use; the message says what to put there instead."""


class AwsFailure(WorkshopError, RuntimeError):
    """An AWS call, build or deployment that failed or was refused; the message says what to do."""


class WorkshopTimeout(WorkshopError, TimeoutError):
    """A wait that ran out before what it waited for happened."""


class EndpointError(WorkshopError):
    """An invocation that did not produce a usable answer."""

    hint = ""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str | None = None,
        field: str | None = None,
        endpoint: str | None = None,
        retry_after: float | None = None,
        body: str | None = None,
        log_stream_arn: str | None = None,
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.field = field
        self.endpoint = endpoint
        self.retry_after = retry_after
        self.body = body
        self.log_stream_arn = log_stream_arn
        self.attempts = 1

    def __str__(self) -> str:
        where = f"{self.endpoint}: " if self.endpoint else ""
        status = " ".join(str(p) for p in (self.status, self.code) if p is not None)
        text = f"{where}{status + ': ' if status else ''}{self.message}"
        if self.field:
            text += f" (field: {self.field})"
        if self.attempts > 1:
            text += f" (gave up after {self.attempts} attempts)"
        if self.hint:
            text += f". {self.hint}"
        if self.log_stream_arn:
            text += f" Container log stream: {self.log_stream_arn}"
        return text
