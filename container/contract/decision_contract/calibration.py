"""``calibration.json``: a temperature and a prediction-set threshold per profile, fitted for one GGUF,
prompt version, readout and order mode.

Written by ``workshop calibrate`` (the client), read once by the adapter at start-up::

    {"format": "decision-calibration/2",
     "fit_for": {"gguf_sha256": "<64 lowercase hex>", "prompt_version": "decision-prompt/1"},
     "order": "as_given",
     "readout": "letters",
     "alpha": 0.1,
     "profiles": {"choice/3-4": {"temperature": 1.7, "kept": true, "reason": null, "fit_n": 30,
                                 "heldout_n": 13, "heldout": {"nll_before", "nll_after", "ece_before",
                                                              "ece_after", "brier_before", "brier_after"},
                                 "conformal": {"threshold": 0.62, "kept": true, "reason": null,
                                               "heldout_n": 13, "temperature": 1.7,
                                               "fit_coverage": 0.93, "fit_set_size": 1.6}},
                  ...},
     "data": {"tasks": "packaged", "fit_n": 33, "heldout_n": 13},
     "created": "2026-12-01T00:00:00Z"}

A profile is ``<question_type>/<band>``: the question type and the band of its option count. Only
kept profiles are served, and a kept profile must carry its held-out figures. A kept ``conformal``
threshold q gives the prediction set: every option whose served probability is at least 1 - q (split
conformal on the held-out answers, nonconformity 1 - p(labelled answer), at the profile's temperature in
force), covering the labelled answer in at least 1 - alpha of such questions. Format 1 files (no
``readout``, ``alpha`` or ``conformal``) still load, as fitted for the ``letters`` readout.
``parse`` holds every rule; both rooms call it, so what one accepts the other accepts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from .names import LETTERS, ORDER_MODES, QUESTION_TYPES, READOUTS

FILE_NAME = "calibration.json"
FORMAT = "decision-calibration/2"
FORMAT_V1 = "decision-calibration/1"  # temperatures only, fitted for the letters readout
FORMATS = (FORMAT_V1, FORMAT)
DEFAULT_ALPHA = 0.1
# (name, lowest, highest option count); the last band is open-ended.
BANDS = (("2", 2, 2), ("3-4", 3, 4), ("5-8", 5, 8), ("9-16", 9, 16), ("17+", 17, None))
BAND_NAMES = tuple(name for name, _, _ in BANDS)
PROFILE_NAMES = tuple(f"{kind}/{band}" for kind in QUESTION_TYPES for band in BAND_NAMES)
HELDOUT_KEYS = ("nll_before", "nll_after", "ece_before", "ece_after", "brier_before", "brier_after")
# A temperature is above the first and at most the second: below 0.001 the scaled logits overflow (and it
# means "argmax" anyway); at 100 an answer is all but uniform.
TEMPERATURE_RANGE = (1e-3, 100.0)

_SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[a-z][a-z0-9_-]*")
# Served probabilities on the set's boundary are in it: a threshold read back from JSON may differ from the
# one computed by the last bit.
SET_TOLERANCE = 1e-12


class CalibrationError(ValueError):
    """A calibration file breaks the format, or does not fit the model; the message names the field."""


def band_of(n_options: int) -> str:
    """The option-count band of a question with ``n_options`` options."""
    if isinstance(n_options, bool) or not isinstance(n_options, int) or n_options < 2:
        raise ValueError(f"a decision has at least 2 options, not {n_options!r}")
    return next(name for name, low, high in BANDS if n_options >= low and (high is None or n_options <= high))


def profile_name(question_type: str, n_options: int) -> str:
    """``<question_type>/<band>``, e.g. ``choice/3-4``."""
    if question_type not in QUESTION_TYPES:
        raise ValueError(f"question_type must be one of {', '.join(QUESTION_TYPES)}, not {question_type!r}")
    return f"{question_type}/{band_of(n_options)}"


def prediction_set(probabilities: Iterable[float], threshold: float) -> list[int]:
    """The indices (in the given order) of the options whose probability is at least ``1 - threshold``:
    the split-conformal set for nonconformity ``1 - p``. It may hold every option, or none."""
    floor = 1.0 - threshold - SET_TOLERANCE
    return [i for i, p in enumerate(probabilities) if p >= floor]


@dataclass(frozen=True)
class Calibration:
    """A checked file: what it was fitted for, and the temperatures and set thresholds of its kept profiles."""

    where: str  # how messages name the file
    gguf_sha256: str
    prompt_version: str
    order: str
    temperatures: dict[str, float]  # the kept profiles only
    profiles: tuple[str, ...]  # every profile the file names, kept or not
    sha256: str | None = None  # of the file's bytes, where the reader has them
    raw: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)
    readout: str = LETTERS
    alpha: float | None = None  # None: a format 1 file, no prediction sets
    thresholds: dict[str, float] = field(default_factory=dict)  # the kept conformal thresholds only

    def describe(self) -> dict[str, Any]:
        return {
            "fit_for": {"gguf_sha256": self.gguf_sha256, "prompt_version": self.prompt_version},
            "order": self.order,
            "readout": self.readout,
            "alpha": self.alpha,
            "profiles": list(self.profiles),
            "temperatures": dict(self.temperatures),
            "set_thresholds": dict(self.thresholds),
            "sha256": self.sha256,
        }

    def applies(self, order: str, readout: str) -> bool:
        """Whether the file's profiles apply to an answer read with ``readout`` in order mode ``order``."""
        return self.order == order and self.readout == readout

    def check_fit(
        self, gguf_sha256: str, gguf_name: str, prompt_version: str, readouts: tuple[str, ...] = READOUTS
    ) -> None:
        """Refuse a file fitted for another GGUF, prompt version, or a readout this side does not serve."""
        if self.readout not in readouts:
            raise CalibrationError(
                f"{self.where} was fit for the readout {self.readout!r}, but this adapter serves "
                f"{', '.join(readouts)}; fit it again with a readout it serves (`workshop calibrate`), remove it, "
                "or set DECISION_ADAPTER_CALIBRATION=off"
            )
        if self.gguf_sha256 != gguf_sha256.lower():
            raise CalibrationError(
                f"{self.where} was fit for the GGUF with sha256 {self.gguf_sha256}, but {gguf_name} has sha256 "
                f"{gguf_sha256.lower()}; fit it again for this model (`workshop calibrate`), remove it from the "
                "model package, or set DECISION_ADAPTER_CALIBRATION=off"
            )
        if self.prompt_version != prompt_version:
            raise CalibrationError(
                f"{self.where} was fit for the prompt version {self.prompt_version!r}, but this adapter renders "
                f"{prompt_version!r}; fit it again with this adapter (`workshop calibrate`), remove it, or set "
                "DECISION_ADAPTER_CALIBRATION=off"
            )


def _number(value: object) -> TypeGuard[int | float]:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def parse(raw: object, where: str = FILE_NAME, sha256: str | None = None) -> Calibration:
    """The document, checked field by field against the format (``sha256``: of the file, if known). Pure."""

    def bad(what: str) -> CalibrationError:
        return CalibrationError(f"{where}: {what}; write it again with `workshop calibrate` (format {FORMAT})")

    def count(value: object, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad(f"{what} must be a non-negative integer, not {value!r}")
        return value

    if not isinstance(raw, dict):
        raise bad("is not a JSON object")
    if raw.get("format") not in FORMATS:
        raise bad(f"format is {raw.get('format')!r}, not one of {', '.join(map(repr, FORMATS))}")
    v1 = raw["format"] == FORMAT_V1
    fit_for = raw.get("fit_for")
    if not isinstance(fit_for, dict):
        raise bad("fit_for must be an object {gguf_sha256, prompt_version}")
    gguf = fit_for.get("gguf_sha256")
    if not isinstance(gguf, str) or not _SHA256.fullmatch(gguf):
        raise bad(f"fit_for.gguf_sha256 must be 64 lowercase hex digits, not {gguf!r}")
    version = fit_for.get("prompt_version")
    if not isinstance(version, str) or not version:
        raise bad("fit_for.prompt_version must be a non-empty string")
    order = raw.get("order")
    if order not in ORDER_MODES:
        raise bad(f"order must be one of {', '.join(ORDER_MODES)}, not {order!r}")
    readout, alpha = LETTERS, None
    if not v1:
        named = raw.get("readout")
        if not isinstance(named, str) or not _NAME.fullmatch(named):
            raise bad(f"readout must name the readout it was fitted for (e.g. {LETTERS!r}), not {named!r}")
        readout = named
        given = raw.get("alpha")
        if not (_number(given) and 0 < given < 1):
            raise bad(f"alpha must be a number between 0 and 1 (exclusive), not {given!r}")
        alpha = float(given)
    profiles = raw.get("profiles")
    if not isinstance(profiles, dict):
        raise bad("profiles must be an object keyed by <question_type>/<band>")
    low, high = TEMPERATURE_RANGE
    temperatures: dict[str, float] = {}
    thresholds: dict[str, float] = {}
    for name, profile in profiles.items():
        if name not in PROFILE_NAMES:
            raise bad(f"profile {name!r} is not one of <{'|'.join(QUESTION_TYPES)}>/<{'|'.join(BAND_NAMES)}>")
        if not isinstance(profile, dict):
            raise bad(f"profiles[{name!r}] must be an object")
        kept = profile.get("kept")
        if not isinstance(kept, bool):
            raise bad(f"profiles[{name!r}].kept must be true or false")
        if not isinstance(profile.get("reason"), (str, type(None))):
            raise bad(f"profiles[{name!r}].reason must be a string or null")
        value = profile.get("temperature")
        if not (_number(value) and low < value <= high):
            raise bad(
                f"profiles[{name!r}].temperature must be a number above {low:g} and at most {high:g}, not {value!r}"
            )
        # What the profile was judged on: the file says why it was kept.
        count(profile.get("fit_n"), f"profiles[{name!r}].fit_n")
        count(profile.get("heldout_n"), f"profiles[{name!r}].heldout_n")
        heldout = profile.get("heldout")
        if heldout is None and kept:
            raise bad(f"profiles[{name!r}] is kept without held-out figures (heldout)")
        if heldout is not None:
            if not isinstance(heldout, dict):
                raise bad(f"profiles[{name!r}].heldout must be an object or null")
            missing = [key for key in HELDOUT_KEYS if not _number(heldout.get(key))]
            if missing:
                raise bad(f"profiles[{name!r}].heldout.{missing[0]} must be a finite number")
        if kept:
            temperatures[name] = float(value)
        if not v1 and profile.get("conformal") is not None:
            served = float(value) if kept else 1.0
            threshold = _conformal(profile["conformal"], f"profiles[{name!r}].conformal", served, bad, count)
            if threshold is not None:
                thresholds[name] = threshold
    data = raw.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), str):
        raise bad("data must be an object naming the tasks (data.tasks)")
    count(data.get("fit_n"), "data.fit_n")
    count(data.get("heldout_n"), "data.heldout_n")
    if not isinstance(raw.get("created"), str):
        raise bad("created must be an ISO time string")
    return Calibration(
        where,
        gguf,
        version,
        order,
        temperatures,
        tuple(profiles),
        sha256,
        raw,
        readout=readout,
        alpha=alpha,
        thresholds=thresholds,
    )


def _conformal(
    entry: object,
    where: str,
    served: float,
    bad: Callable[[str], CalibrationError],
    count: Callable[[object, str], int],
) -> float | None:
    """A profile's ``conformal`` entry, checked: its threshold when kept, else None. A kept threshold holds for
    the probabilities at the temperature the adapter serves for the profile (``served``), so it must say so."""
    if not isinstance(entry, dict):
        raise bad(f"{where} must be an object or null")
    kept = entry.get("kept")
    if not isinstance(kept, bool):
        raise bad(f"{where}.kept must be true or false")
    if not isinstance(entry.get("reason"), (str, type(None))):
        raise bad(f"{where}.reason must be a string or null")
    count(entry.get("heldout_n"), f"{where}.heldout_n")
    threshold = entry.get("threshold")
    if threshold is None and kept:
        raise bad(f"{where} is kept without a threshold")
    if threshold is not None and not (_number(threshold) and 0 <= threshold <= 1):
        raise bad(f"{where}.threshold must be a number from 0 to 1 (a nonconformity 1 - p), not {threshold!r}")
    for key in ("temperature", "fit_coverage", "fit_set_size"):
        if entry.get(key) is not None and not _number(entry[key]):
            raise bad(f"{where}.{key} must be a finite number or null")
    if kept and entry.get("temperature") is not None and not math.isclose(entry["temperature"], served, rel_tol=1e-9):
        raise bad(
            f"{where}.temperature is {entry['temperature']!r}, but the profile serves temperature {served:g}: "
            "the threshold holds only for the probabilities it was fitted on"
        )
    return float(threshold) if kept and threshold is not None else None
