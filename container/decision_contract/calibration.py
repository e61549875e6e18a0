"""``calibration.json``: a temperature per profile, fitted for one GGUF, prompt version and order mode.

Written by ``workshop calibrate`` (the client), read once by the adapter at start-up::

    {"format": "decision-calibration/1",
     "fit_for": {"gguf_sha256": "<64 lowercase hex>", "prompt_version": "decision-prompt/1"},
     "order": "as_given",
     "profiles": {"choice/3-4": {"temperature": 1.7, "kept": true, "reason": null, "fit_n": 30,
                                 "heldout_n": 13, "heldout": {"nll_before", "nll_after", "ece_before",
                                                              "ece_after", "brier_before", "brier_after"}},
                  ...},
     "data": {"tasks": "packaged", "fit_n": 33, "heldout_n": 13},
     "created": "2026-12-01T00:00:00Z"}

A profile is ``<question_type>/<band>``: the question type and the band of its option count. Only
kept profiles are served, and a kept profile must carry its held-out figures. ``parse`` holds every
rule; both rooms call it, so what one accepts the other accepts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from .names import ORDER_MODES, QUESTION_TYPES

FILE_NAME = "calibration.json"
FORMAT = "decision-calibration/1"
# (name, lowest, highest option count); the last band is open-ended.
BANDS = (("2", 2, 2), ("3-4", 3, 4), ("5-8", 5, 8), ("9-16", 9, 16), ("17+", 17, None))
BAND_NAMES = tuple(name for name, _, _ in BANDS)
PROFILE_NAMES = tuple(f"{kind}/{band}" for kind in QUESTION_TYPES for band in BAND_NAMES)
HELDOUT_KEYS = ("nll_before", "nll_after", "ece_before", "ece_after", "brier_before", "brier_after")
# A temperature is above the first and at most the second: below 0.001 the scaled logits overflow (and it
# means "argmax" anyway); at 100 an answer is all but uniform.
TEMPERATURE_RANGE = (1e-3, 100.0)

_SHA256 = re.compile(r"[0-9a-f]{64}")


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


@dataclass(frozen=True)
class Calibration:
    """A checked file: what it was fitted for, and the temperatures of its kept profiles."""

    where: str  # how messages name the file
    gguf_sha256: str
    prompt_version: str
    order: str
    temperatures: dict[str, float]  # the kept profiles only
    profiles: tuple[str, ...]  # every profile the file names, kept or not
    sha256: str | None = None  # of the file's bytes, where the reader has them
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    def describe(self) -> dict:
        return {"fit_for": {"gguf_sha256": self.gguf_sha256, "prompt_version": self.prompt_version},
                "order": self.order, "profiles": list(self.profiles), "temperatures": dict(self.temperatures),
                "sha256": self.sha256}

    def check_fit(self, gguf_sha256: str, gguf_name: str, prompt_version: str) -> None:
        """Refuse a file fitted for another GGUF or another prompt version, naming both."""
        if self.gguf_sha256 != gguf_sha256.lower():
            raise CalibrationError(
                f"{self.where} was fit for the GGUF with sha256 {self.gguf_sha256}, but {gguf_name} has sha256 "
                f"{gguf_sha256.lower()}; fit it again for this model (`workshop calibrate`), remove it from the "
                "model package, or set DECISION_ADAPTER_CALIBRATION=off")
        if self.prompt_version != prompt_version:
            raise CalibrationError(
                f"{self.where} was fit for the prompt version {self.prompt_version!r}, but this adapter renders "
                f"{prompt_version!r}; fit it again with this adapter (`workshop calibrate`), remove it, or set "
                "DECISION_ADAPTER_CALIBRATION=off")


def _number(value) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)


def parse(raw, where: str = FILE_NAME, sha256: str | None = None) -> Calibration:
    """The document, checked field by field against the format (``sha256``: of the file, if known). Pure."""
    def bad(what: str) -> CalibrationError:
        return CalibrationError(f"{where}: {what}; write it again with `workshop calibrate` (format {FORMAT})")

    def count(value, what: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad(f"{what} must be a non-negative integer, not {value!r}")
        return value

    if not isinstance(raw, dict):
        raise bad("is not a JSON object")
    if raw.get("format") != FORMAT:
        raise bad(f"format is {raw.get('format')!r}, not {FORMAT!r}")
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
    profiles = raw.get("profiles")
    if not isinstance(profiles, dict):
        raise bad("profiles must be an object keyed by <question_type>/<band>")
    low, high = TEMPERATURE_RANGE
    temperatures = {}
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
            raise bad(f"profiles[{name!r}].temperature must be a number above {low:g} and at most {high:g}, "
                      f"not {value!r}")
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
    data = raw.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("tasks"), str):
        raise bad("data must be an object naming the tasks (data.tasks)")
    count(data.get("fit_n"), "data.fit_n")
    count(data.get("heldout_n"), "data.heldout_n")
    if not isinstance(raw.get("created"), str):
        raise bad("created must be an ISO time string")
    return Calibration(where, gguf, version, order, temperatures, tuple(profiles), sha256, raw)
