"""What the dialects' parsers share: strict pydantic bases, field paths, and turning a pydantic
``ValidationError`` into the adapter's own ``InvalidType`` (400) / ``InvalidValue`` (422); and the
request ids their answers carry.

Wrong JSON types are 400s and well-typed but unusable values are 422s, both naming the field
as a path such as ``questions[1].options[0].id``. Validators raise ``PydanticCustomError`` with
the type ``invalid_value`` or ``invalid_type`` and a message that the field's path prefixes.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Literal, TypeAlias

from pydantic import AfterValidator, BaseModel, ConfigDict, Discriminator, ValidationError
from pydantic_core import ErrorDetails, PydanticCustomError
from werkzeug.datastructures import Headers

from decision_contract.names import LETTERS, NORMALIZATIONS, READOUTS

from ..caller_errors import AdapterError, InvalidType, InvalidValue
from ..questions import MAX_ID_CHARS

# Tags of the callable discriminators (a bare-string option or an object; a chat decision that is a typed
# question): they show in pydantic's error locations and are dropped from field paths. No field of any
# request is spelt like them.
TAG_STRING, TAG_OBJECT, TAG_LIST, TAG_QUESTION = "<string>", "<object>", "<list>", "<question>"


class Strict(BaseModel):
    """A request object: JSON types as sent (no coercion), unknown fields refused."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Answer(BaseModel):
    """An answer object, described for the OpenAPI document (answers are built as plain dicts)."""

    model_config = ConfigDict(extra="allow")


def type_name(value: object) -> str:
    return {
        dict: "object",
        list: "array",
        str: "string",
        bool: "boolean",
        type(None): "null",
        int: "integer",
        float: "number",
    }.get(type(value), type(value).__name__)


def value_error(message: str) -> PydanticCustomError:
    """A 422 about the field it is raised for; the field's path is put before ``message``."""
    return PydanticCustomError("invalid_value", message)


def type_error(message: str) -> PydanticCustomError:
    return PydanticCustomError("invalid_type", message)


def _non_blank(value: str) -> str:
    if not value.strip():
        raise value_error("must not be empty")
    return value


def _short_id(value: str) -> str:
    if not value.strip():
        raise value_error("must not be empty")
    if len(value) > MAX_ID_CHARS:
        raise value_error(f"is longer than {MAX_ID_CHARS} characters; shorten it")
    return value


NonBlank = Annotated[str, AfterValidator(_non_blank)]
Id = Annotated[str, AfterValidator(_short_id)]

# The contract's vocabularies as pydantic's choices: pydantic checks (and the OpenAPI document lists) the
# contract's values; mypy, which cannot read a Literal built from a tuple, sees strings.
OTHER_READOUTS = tuple(name for name in READOUTS if name != LETTERS)  # the readouts that name themselves
if TYPE_CHECKING:
    ReadoutChoice: TypeAlias = str
    OtherReadoutChoice: TypeAlias = str
    NormalizationChoice: TypeAlias = str
else:
    ReadoutChoice = Literal[READOUTS]
    OtherReadoutChoice = Literal[OTHER_READOUTS]
    NormalizationChoice = Literal[NORMALIZATIONS]


def string_or_list(what: str) -> Discriminator:
    """A discriminator for ``str | list[...]`` fields: errors come from the branch the JSON type picks."""

    def kind(value: object) -> str | None:
        return TAG_STRING if isinstance(value, str) else TAG_LIST if isinstance(value, list) else None

    return Discriminator(kind, custom_error_type="invalid_type", custom_error_message=f"must be {what}")


def field_path(loc: Sequence[str | int]) -> str:
    path = ""
    for part in loc:
        if part in (TAG_STRING, TAG_OBJECT, TAG_LIST, TAG_QUESTION):
            continue
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    return path


def finite(value: float, field: str) -> float:
    if not math.isfinite(value):
        raise InvalidValue(f"{field} must be a finite number", field)
    return value


_TYPES = {
    "string_type": "a string",
    "float_type": "a number",
    "int_type": "an integer",
    "bool_type": "a boolean",
    "list_type": "an array",
    "dict_type": "an object",
    "model_type": "an object",
    "model_attributes_type": "an object",
    "tuple_type": "an array",
}


ErrorWording = Callable[[str | None, ErrorDetails], AdapterError | None]


def adapter_error(
    exc: ValidationError, prefix: str = "", messages: Mapping[str, ErrorWording] | None = None
) -> AdapterError:
    """The first problem pydantic found, as the adapter's error naming its field.

    ``messages``: per error type, a function (field, error) -> AdapterError for wording a dialect owns.
    """
    errors = exc.errors(include_url=False)
    extras = [e for e in errors if e["type"] == "extra_forbidden"]
    first = errors[0]
    if first["type"] == "missing" and extras:
        first = extras[0]  # a required field missing beside an unknown one: most likely misspelt, say which
    field = prefix + field_path(first["loc"]) if first["loc"] else (prefix.rstrip(".") or None)
    kind, value = first["type"], first.get("input")
    if messages and kind in messages:
        made = messages[kind](field, first)
        if made is not None:
            return made
    if kind == "invalid_value":
        return InvalidValue(f"{field} {first['msg']}" if field else first["msg"], field)
    if kind == "invalid_type":
        return InvalidType(f"{field} {first['msg']}" if field else first["msg"], field)
    if kind == "missing":
        return InvalidValue(f"{field} is required", field)
    if kind == "extra_forbidden":
        where = (field or "").rpartition(".")[0]
        names = [
            prefix + field_path(e["loc"]) for e in extras if field_path(e["loc"][:-1]) == field_path(first["loc"][:-1])
        ]
        listed = ", ".join(n.rpartition(".")[2] for n in names)
        return InvalidValue(
            f"unknown field{'s' if len(names) > 1 else ''} {listed}"
            + (f" in {where}" if where else "")
            + "; check the spelling (these are not part of "
            "the schema)",
            field,
        )
    if kind == "float_type" and isinstance(value, int) and not isinstance(value, bool):
        return InvalidValue(f"{field} is too large a number", field)  # an integer beyond float range
    if kind in _TYPES:
        return InvalidType(f"{field} must be {_TYPES[kind]}, got {type_name(value)}", field)
    if kind == "literal_error":
        return InvalidValue(f"{field} must be one of {first['ctx']['expected']}", field)
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return InvalidType(f"{field} has the wrong type, got {type_name(value)}", field)
    if kind == "too_short":
        ctx = first.get("ctx", {})
        return InvalidValue(
            f"{field} has {ctx.get('actual_length')} items; send at least {ctx.get('min_length')}", field
        )
    if kind == "too_long":
        ctx = first.get("ctx", {})
        return InvalidValue(
            f"{field} has {ctx.get('actual_length')} items; send at most {ctx.get('max_length')}", field
        )
    if kind.startswith(("greater", "less")):
        return InvalidValue(f"{field} {first['msg'].replace('Input should be', 'must be')}", field)
    return InvalidValue(f"{field}: {first['msg']}" if field else first["msg"], field)


# -- request ids ------------------------------------------------------------------------------------

# The header SageMaker's InvokeEndpoint sets from its InferenceId member (botocore's sagemaker-runtime
# model), and the caller's own. An id that is longer or holds other characters is not used: it goes
# into log lines and headers as sent.
INFERENCE_ID_HEADER = "X-Amzn-SageMaker-Inference-Id"
REQUEST_ID_HEADER = "X-Request-Id"
_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/+=@-]{0,127}")


def usable_id(value: str | None) -> str | None:
    value = (value or "").strip()
    return value if _SAFE_ID.fullmatch(value) else None


def choose_request_id(headers: Headers | Mapping[str, str], make: Callable[[], str] = lambda: str(uuid.uuid4())) -> str:
    """SageMaker's inference id, else the caller's X-Request-Id, else a new uuid4."""
    return usable_id(headers.get(INFERENCE_ID_HEADER)) or usable_id(headers.get(REQUEST_ID_HEADER)) or make()
