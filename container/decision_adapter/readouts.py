"""The readouts served: the registry (readout.py) with the built-in readouts registered, ``letters``
(readout_letters.py) and ``cloze`` (readout_cloze.py). A new readout is one module that registers itself
(``readout.register``), imported here, and its tests."""

from __future__ import annotations

from . import readout_cloze, readout_letters
from .readout import READOUT_METHODS, READOUTS, Planned, Readout, register, unregister

__all__ = [
    "READOUTS",
    "READOUT_METHODS",
    "Planned",
    "Readout",
    "readout_cloze",
    "readout_letters",
    "register",
    "unregister",
]
