"""One setting of the adapter: how a ``Settings`` field declares it (``setting``, which records a ``Setting``)
and how its value is read from the environment and checked against what it declares (``read``).

settings.py declares every setting with these; sample_aliases.py reads the published sample's names.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict, TypeVar

if TYPE_CHECKING:
    from typing_extensions import Unpack

LLAMA_PREFIX = "SM_LLAMA_CPP_"  # llama.cpp's settings, named as the DLC names them
ADAPTER_PREFIX = "DECISION_ADAPTER_"  # the settings only the adapter understands


class SettingsError(ValueError):
    """An environment variable holds a value the adapter cannot use."""


@dataclass(frozen=True)
class Setting:
    """How one field of ``Settings`` is read from the environment and documented."""

    env: str
    doc: str
    kind: str  # int | float | text | choice | switch (off/on as a bool) | level | key
    default: object = None
    also: tuple[str, ...] = ()  # read, in this order, when ``env`` is unset
    minimum: float | None = None
    maximum: float | None = None
    choices: tuple[str, ...] = ()
    spellings: Mapping[str, str] = field(default_factory=dict)  # other words for a choice
    sample: str | None = None  # the published sample's name for the same setting
    sample_value: Callable[[str], str] | None = None  # the sample's value in our terms, when not the same
    llama: str | None = None  # the llama-cpp-python keyword it becomes
    name: str = ""  # the field's name, filled in by declared()


class Rules(TypedDict, total=False):
    """What ``setting`` passes on to ``Setting``, beyond its name, default, documentation and kind."""

    also: tuple[str, ...]
    minimum: float
    maximum: float
    choices: tuple[str, ...]
    spellings: Mapping[str, str]
    sample: str
    sample_value: Callable[[str], str]
    llama: str


T = TypeVar("T")
Number = TypeVar("Number", int, float)


def setting(env: str, default: T, doc: str, *, kind: str | None = None, **rules: Unpack[Rules]) -> T:
    """A ``Settings`` field read from ``env`` (``kind`` follows the default's type when not given); typed as
    its default, as ``dataclasses.field`` is."""
    if kind is None:
        kind = {bool: "switch", int: "int", float: "float"}.get(
            type(default), "choice" if "choices" in rules else "text"
        )
    if kind == "switch":
        rules.setdefault("choices", ("off", "on"))
    if "choices" in rules and kind != "switch" and default not in rules["choices"]:
        raise AssertionError(f"{env}: default {default!r} is not one of its choices")
    spec = Setting(env=env, doc=doc, kind=kind, default=default, **rules)
    return field(default=default, metadata={"setting": spec}, repr=kind != "key")


def parse_int(raw: str, name: str, minimum: float | None = None, maximum: float | None = None) -> int:
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not an integer; set it to a whole number or unset it") from None
    return bounded(value, name, minimum, maximum)


def bounded(value: Number, name: str, minimum: float | None, maximum: float | None) -> Number:
    if minimum is not None and not value >= minimum:
        raise SettingsError(f"{name}={value} is below {minimum}; set it to at least {minimum}")
    if maximum is not None and value > maximum:
        raise SettingsError(f"{name}={value} is above {maximum}; set it to at most {maximum}")
    return value


def read(spec: Setting, env: Mapping[str, str]) -> object:
    """The value of one setting in ``env``: its default when unset or blank."""
    name = next((n for n in (spec.env, *spec.also) if (env.get(n) or "").strip()), spec.env)
    raw = (env.get(name) or "").strip()
    if not raw:
        return spec.default
    if spec.kind == "int":
        return parse_int(raw, name, spec.minimum, spec.maximum)
    if spec.kind == "float":
        try:
            number = float(raw)
        except ValueError:
            raise SettingsError(
                f"{name}={raw!r} is not a number; set it to a number (seconds, for the time limits) or unset it"
            ) from None
        return bounded(number, name, spec.minimum, spec.maximum)
    if spec.kind in ("choice", "switch", "level"):
        word = raw.upper() if spec.kind == "level" else raw.lower()
        word = spec.spellings.get(word, word)
        if word not in spec.choices:
            raise SettingsError(f"{name}={word!r} is not one of {', '.join(spec.choices)}")
        return word == "on" if spec.kind == "switch" else word
    if spec.kind == "key" and not (raw.isascii() and raw.isprintable() and " " not in raw):
        raise SettingsError(f"{name} must be printable ASCII without spaces (it travels in an HTTP header)")
    return raw
