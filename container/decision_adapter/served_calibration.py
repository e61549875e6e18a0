"""Served calibration: ``calibration.json`` in the model folder, read once at start-up.

The format and its rules are the contract's (``decision_contract.calibration``): a temperature and a
prediction-set threshold per profile ``<question_type>/<band>``, fitted for one GGUF, prompt version,
readout and order mode, served only where kept. Here: ``load`` reads the file and stops the start-up
when it was fitted for another GGUF, prompt version or a readout this adapter does not serve, naming
both; ``in_force`` picks the temperature of one question: the request's own when it sets one, else the
profile's when the file was fitted for the answer's readout and order mode and the profile was kept,
else 1; ``set_of`` gives the prediction set under the same conditions (none with a request's own
temperature: the threshold holds for the probabilities it was fitted on).
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from decision_contract.calibration import Calibration, CalibrationError, parse, prediction_set, profile_name
from decision_contract.names import LETTERS

log = logging.getLogger(__name__)

SOURCE_CALIBRATION, SOURCE_REQUEST, SOURCE_NONE = "calibration", "request", "none"

__all__ = ["Calibration", "CalibrationError", "TemperatureChoice", "in_force", "load", "set_of"]


class TemperatureChoice(TypedDict):
    """How a question's temperature was chosen: the profile it comes from, if any, and its source."""

    profile: str | None
    temperature: float
    source: str  # SOURCE_CALIBRATION, SOURCE_REQUEST or SOURCE_NONE


def in_force(
    calibration: Calibration | None,
    question_type: str,
    n: int,
    order: str,
    request_temperature: float | None,
    readout: str = LETTERS,
) -> tuple[float, TemperatureChoice]:
    """The temperature of this question, and how it was chosen."""
    if request_temperature is not None:
        return float(request_temperature), {
            "profile": None,
            "temperature": float(request_temperature),
            "source": SOURCE_REQUEST,
        }
    profile = profile_name(question_type, n)
    if calibration is not None and calibration.applies(order, readout) and profile in calibration.temperatures:
        value = calibration.temperatures[profile]
        return value, {"profile": profile, "temperature": value, "source": SOURCE_CALIBRATION}
    return 1.0, {"profile": None, "temperature": 1.0, "source": SOURCE_NONE}


def set_of(
    calibration: Calibration | None,
    question_type: str,
    order: str,
    request_temperature: float | None,
    probabilities: npt.NDArray[np.float64],
    readout: str = LETTERS,
) -> list[int] | None:
    """The prediction set (option indices in the given order) of served ``probabilities``, or None when no
    kept threshold applies: no file, another readout or order mode, a request's own temperature, or a
    profile whose threshold was not kept."""
    if calibration is None or request_temperature is not None or not calibration.applies(order, readout):
        return None
    threshold = calibration.thresholds.get(profile_name(question_type, len(probabilities)))
    return None if threshold is None else prediction_set(probabilities, threshold)


def load(
    path: Path | None, gguf_sha256: str, gguf_name: str, prompt_version: str, mode: str = "auto"
) -> Calibration | None:
    """The checked calibration at ``path`` (None when there is none or ``mode`` is off)."""
    if mode == "off" or path is None:
        if path is not None:
            log.info("%s is not used (DECISION_ADAPTER_CALIBRATION=off)", path)
        return None
    try:
        data = Path(path).read_bytes()
        raw = json.loads(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CalibrationError(
            f"{path} is not readable JSON ({exc}); write it again with `workshop calibrate` "
            "or set DECISION_ADAPTER_CALIBRATION=off"
        ) from None
    calibration = parse(raw, str(path), hashlib.sha256(data).hexdigest())
    calibration.check_fit(gguf_sha256, gguf_name, prompt_version)
    log.info(
        "calibration: %s (readout %s, order %s; kept profiles %s; prediction sets %s)",
        path,
        calibration.readout,
        calibration.order,
        ", ".join(f"{k} T={v:g}" for k, v in calibration.temperatures.items()) or "none",
        ", ".join(f"{k} q={v:g}" for k, v in calibration.thresholds.items()) or "none",
    )
    return calibration
