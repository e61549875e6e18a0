"""``WorkshopError``: the one base of every failure the workshop library raises on purpose.

Each such error's message says what to do next (set a value, run an earlier notebook, ask for a
quota, wait and retry). Callers tell them from bugs with one ``except WorkshopError``: the command
line prints the message in one line and the notebooks show it without a traceback, while any other
exception is a bug and keeps its traceback. Each module's own classes keep a built-in base as well
(``ValueError`` for bad input, ``RuntimeError`` for a failed step, ``TimeoutError`` for waits), so
``except ValueError`` around a parser goes on working.
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

    def __reduce__(self):  # pickles (pytest-xdist, multiprocessing) with both fields
        return type(self), (self.notebook, self.what)
