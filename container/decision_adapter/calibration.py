"""Served calibration: ``calibration.json`` in the model folder, fitted for one GGUF and prompt version.

The file (written by ``workshop calibrate``) holds a temperature per *profile*,
``<question_type>/<band>``: the question type (``choice``, ``noul``, ``score``) and the band of its
option count (``2``, ``3-4``, ``5-8``, ``9-16``, ``17+``), fitted in one order mode on labelled tasks
and kept only where held-out data improved (``"kept": true``)::

    {"format": "decision-calibration/1",
     "fit_for": {"gguf_sha256": "<64 hex>", "prompt_version": "decision-prompt/1"},
     "order": "as_given",
     "profiles": {"choice/2": {"temperature": 1.7, "kept": true, ...}, ...}, ...}

It is read once at start-up (``load``): a file fit for another GGUF or prompt version stops the
start-up naming both. ``in_force`` picks the temperature of one question: the request's own when it
sets one, else the profile's when the file was fit in the request's order mode and the profile was
kept, else 1.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from .settings import ORDER_MODES

log = logging.getLogger(__name__)

CALIBRATION_NAME = "calibration.json"
FORMAT = "decision-calibration/1"
QUESTION_TYPES = ("choice", "noul", "score")
BANDS = (("2", 2, 2), ("3-4", 3, 4), ("5-8", 5, 8), ("9-16", 9, 16), ("17+", 17, None))
PROFILE_NAMES = tuple(f"{kind}/{band}" for kind in QUESTION_TYPES for band, _, _ in BANDS)
SOURCE_CALIBRATION, SOURCE_REQUEST, SOURCE_NONE = "calibration", "request", "none"
HELDOUT_KEYS = ("nll_before", "nll_after", "ece_before", "ece_after", "brier_before", "brier_after")
_SHA256 = re.compile(r"[0-9a-f]{64}")


class CalibrationError(ValueError):
    """calibration.json cannot be served with this model."""


def band_of(n: int) -> str:
    for name, low, high in BANDS:
        if n >= low and (high is None or n <= high):
            return name
    raise ValueError(f"{n} options: a decision has at least 2")


def profile_name(question_type: str, n: int) -> str:
    return f"{question_type}/{band_of(n)}"


@dataclass(frozen=True)
class Calibration:
    path: str
    sha256: str  # of the file itself
    gguf_sha256: str
    prompt_version: str
    order: str
    temperatures: dict[str, float]  # the kept profiles only
    profiles: tuple[str, ...]  # every profile the file names, kept or not
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    def describe(self) -> dict:
        return {"fit_for": {"gguf_sha256": self.gguf_sha256, "prompt_version": self.prompt_version},
                "order": self.order, "profiles": list(self.profiles), "temperatures": dict(self.temperatures),
                "sha256": self.sha256}


def in_force(calibration: Calibration | None, question_type: str, n: int, order: str,
             request_temperature: float | None) -> tuple[float, dict]:
    """(the temperature of this question, how it was chosen: {profile, temperature, source})."""
    profile = profile_name(question_type, n)
    if request_temperature is not None:
        return float(request_temperature), {"profile": None, "temperature": float(request_temperature),
                                            "source": SOURCE_REQUEST}
    if calibration is not None and calibration.order == order and profile in calibration.temperatures:
        value = calibration.temperatures[profile]
        return value, {"profile": profile, "temperature": value, "source": SOURCE_CALIBRATION}
    return 1.0, {"profile": None, "temperature": 1.0, "source": SOURCE_NONE}


def parse(raw, where: str, file_sha256: str) -> Calibration:
    """The file's content, checked for shape (pure: nothing is compared with the model yet)."""
    def bad(what: str) -> CalibrationError:
        return CalibrationError(f"{where}: {what}; write it again with `workshop calibrate` (format {FORMAT})")

    def count(value, what: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise bad(f"{what} must be a non-negative integer, not {value!r}")

    def number(value) -> bool:
        return not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)

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
    temperatures = {}
    for name, profile in profiles.items():
        if name not in PROFILE_NAMES:
            raise bad(f"profile {name!r} is not one of <{'|'.join(QUESTION_TYPES)}>/<"
                      f"{'|'.join(b for b, _, _ in BANDS)}>")
        if not isinstance(profile, dict):
            raise bad(f"profiles[{name!r}] must be an object")
        kept = profile.get("kept")
        if not isinstance(kept, bool):
            raise bad(f"profiles[{name!r}].kept must be true or false")
        if not isinstance(profile.get("reason"), (str, type(None))):
            raise bad(f"profiles[{name!r}].reason must be a string or null")
        value = profile.get("temperature")
        if not (number(value) and 1e-3 < value <= 100):
            raise bad(f"profiles[{name!r}].temperature must be a number above 0.001 and at most 100, not {value!r}")
        # What the profile was judged on: the file says why it was kept, and the client checks the same.
        count(profile.get("fit_n"), f"profiles[{name!r}].fit_n")
        count(profile.get("heldout_n"), f"profiles[{name!r}].heldout_n")
        heldout = profile.get("heldout")
        if heldout is None and kept:
            raise bad(f"profiles[{name!r}] is kept without held-out figures (heldout)")
        if heldout is not None:
            if not isinstance(heldout, dict):
                raise bad(f"profiles[{name!r}].heldout must be an object or null")
            missing = [key for key in HELDOUT_KEYS if not number(heldout.get(key))]
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
    return Calibration(where, file_sha256, gguf, version, order, temperatures, tuple(profiles), raw)


def check_fit(calibration: Calibration, gguf_sha256: str, gguf_name: str, prompt_version: str) -> None:
    """Stop the start-up when the file was fit for another model build or prompt."""
    if calibration.gguf_sha256 != gguf_sha256.lower():
        raise CalibrationError(
            f"{calibration.path} was fit for the GGUF with sha256 {calibration.gguf_sha256}, but {gguf_name} has "
            f"sha256 {gguf_sha256}; fit it again for this model (`workshop calibrate`), remove it from the model "
            "package, or set DECISION_ADAPTER_CALIBRATION=off")
    if calibration.prompt_version != prompt_version:
        raise CalibrationError(
            f"{calibration.path} was fit for the prompt version {calibration.prompt_version!r}, but this adapter "
            f"renders {prompt_version!r}; fit it again with this adapter (`workshop calibrate`), remove it, or set "
            "DECISION_ADAPTER_CALIBRATION=off")


def load(path: Path | None, gguf_sha256: str, gguf_name: str, prompt_version: str,
         mode: str = "auto") -> Calibration | None:
    """The checked calibration at ``path`` (None when there is none or ``mode`` is off)."""
    if mode == "off" or path is None:
        if path is not None:
            log.info("%s is not used (DECISION_ADAPTER_CALIBRATION=off)", path)
        return None
    try:
        data = Path(path).read_bytes()
        raw = json.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CalibrationError(f"{path} is not readable JSON ({exc}); write it again with `workshop calibrate` "
                               "or set DECISION_ADAPTER_CALIBRATION=off") from None
    calibration = parse(raw, str(path), hashlib.sha256(data).hexdigest())
    check_fit(calibration, gguf_sha256, gguf_name, prompt_version)
    log.info("calibration: %s (order %s; kept profiles %s)", path, calibration.order,
             ", ".join(f"{k} T={v:g}" for k, v in calibration.temperatures.items()) or "none")
    return calibration
