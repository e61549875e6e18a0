"""The OpenAI Decisions API's requests (apis/decisions.py): their models as the ``openai`` library types them,
parsing a body into them with errors in the API's words, and what the core reads of them: the state an
``input`` makes (``state_of``), a question's instructions, the model name asked for."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, Union

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError
from pydantic_core import ErrorDetails

from ..caller_errors import AdapterError, InvalidType, InvalidValue, ModelNotFound
from ..prompt import render_json
from ..questions import (
    MAX_CHOICE_OPTIONS,
    MAX_DECISION_QUESTIONS,
    MAX_SCORE_LEVELS,
    MIN_CHOICE_OPTIONS,
    MIN_SCORE_LEVELS,
)
from .common import TAG_LIST, TAG_STRING, ErrorWording, NonBlank, Strict, adapter_error, string_or_list, type_name
from .typed import accepted_model_names, served_model_name

MAX_NAME_CHARS = 1024


class CacheBreakpoint(Strict):
    mode: Literal["explicit"]


class TextPart(Strict):
    type: Literal["input_text"]
    text: str
    prompt_cache_breakpoint: CacheBreakpoint | None = None  # accepted; the adapter caches the state on its own


class JsonPart(Strict):
    """A JSON object or array of objects, read as its JSON text."""

    type: Literal["input_json"]
    data: Union[dict[str, Any], list[dict[str, Any]]]


class ImagePart(BaseModel):
    """Typed by the API, refused after parsing (this endpoint reads text): described, not used."""

    model_config = ConfigDict(extra="allow", frozen=True)
    type: Literal["input_image"]
    image_url: str | None = None


class OutputTextPart(Strict):
    type: Literal["output_text"]
    text: str


class RefusalPart(Strict):
    type: Literal["refusal"]
    refusal: str


def _by_type(*members: tuple[str, type[BaseModel]]) -> Any:
    """A union of part or item models told apart by their ``type`` (or a message's ``role``); the tags are
    bracketed so they never read as field names in an error's path."""

    def kind(value: object) -> str | None:
        if not isinstance(value, dict):
            return None
        key = value.get("role") if "role" in value else value.get("type")
        return f"<{key}>" if isinstance(key, str) else None

    return Annotated[Union[tuple(Annotated[m, Tag(f"<{t}>")] for t, m in members)], Discriminator(kind)]


def _content(part: Any, what: str) -> Any:
    return Annotated[
        Union[Annotated[str, Tag(TAG_STRING)], Annotated[list[part], Field(min_length=1), Tag(TAG_LIST)]],
        string_or_list(what),
    ]


# The parts and contents are unions built for pydantic (tags, discriminators, error wording); mypy, which
# cannot evaluate them, reads the plain unions they stand for.
if TYPE_CHECKING:
    InputPart: TypeAlias = TextPart | JsonPart | ImagePart
    AssistantPart: TypeAlias = OutputTextPart | RefusalPart
    OutputPart: TypeAlias = TextPart | ImagePart
    UserContent: TypeAlias = str | list[InputPart]
    TextOnlyContent: TypeAlias = str | list[TextPart]
    AssistantContent: TypeAlias = str | list[AssistantPart]
    OutputContent: TypeAlias = str | list[OutputPart]
else:
    InputPart = _by_type(("input_text", TextPart), ("input_json", JsonPart), ("input_image", ImagePart))
    TextOnlyPart = _by_type(("input_text", TextPart))
    AssistantPart = _by_type(("output_text", OutputTextPart), ("refusal", RefusalPart))
    OutputPart = _by_type(("input_text", TextPart), ("input_image", ImagePart))
    UserContent = _content(InputPart, "a string or a list of input_text / input_json parts")
    TextOnlyContent = _content(TextOnlyPart, "a string or a list of input_text parts")
    AssistantContent = _content(AssistantPart, "a string or a list of output_text / refusal parts")
    OutputContent = _content(OutputPart, "a string or a list of input_text parts")


class _Message(Strict):
    """A message item: its role and content are each subclass's own."""

    type: Literal["message"] | None = None


class UserMessage(_Message):
    role: Literal["user"]
    content: UserContent


class SystemMessage(_Message):
    role: Literal["system"]
    content: TextOnlyContent


class DeveloperMessage(_Message):
    role: Literal["developer"]
    content: TextOnlyContent


class AssistantMessage(_Message):
    role: Literal["assistant"]
    content: AssistantContent
    phase: Literal["commentary", "final_answer"] | None = None


Status = Literal["in_progress", "completed", "incomplete"] | None


class _ToolItem(Strict):
    """What every tool call and tool output item carries beside its own fields."""

    call_id: NonBlank
    id: str | None = None
    status: Status = None


class _ToolCall(_ToolItem):
    name: NonBlank
    namespace: str | None = None


class _ToolOutput(_ToolItem):
    output: OutputContent


class FunctionCall(_ToolCall):
    type: Literal["function_call"]
    arguments: str


class FunctionCallOutput(_ToolOutput):
    type: Literal["function_call_output"]


class CustomToolCall(_ToolCall):
    type: Literal["custom_tool_call"]
    input: str


class CustomToolCallOutput(_ToolOutput):
    type: Literal["custom_tool_call_output"]


INPUT_ITEMS = (
    ("user", UserMessage),
    ("system", SystemMessage),
    ("developer", DeveloperMessage),
    ("assistant", AssistantMessage),
    ("function_call", FunctionCall),
    ("function_call_output", FunctionCallOutput),
    ("custom_tool_call", CustomToolCall),
    ("custom_tool_call_output", CustomToolCallOutput),
)
MESSAGE_ROLES = ("user", "system", "developer", "assistant")
ITEM_TYPES = tuple(t for t, _ in INPUT_ITEMS if t not in MESSAGE_ROLES)

if TYPE_CHECKING:
    InputItem: TypeAlias = (
        UserMessage
        | SystemMessage
        | DeveloperMessage
        | AssistantMessage
        | FunctionCall
        | FunctionCallOutput
        | CustomToolCall
        | CustomToolCallOutput
    )
    QuestionPart: TypeAlias = InputPart
else:
    InputItem = _by_type(*INPUT_ITEMS)
    QuestionPart = _by_type(("input_text", TextPart), ("input_json", JsonPart), ("input_image", ImagePart))
Input = Annotated[
    Union[Annotated[NonBlank, Tag(TAG_STRING)], Annotated[list[InputItem], Field(min_length=1), Tag(TAG_LIST)]],
    string_or_list("a string or a list of messages and tool calls"),
]
Instructions = Annotated[
    Union[Annotated[NonBlank, Tag(TAG_STRING)], Annotated[list[QuestionPart], Field(min_length=1), Tag(TAG_LIST)]],
    string_or_list("a string or a list of input_text / input_json parts"),
]
Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME_CHARS)] | None


class _Question(Strict):
    name: Name = Field(None, description="Echoed in the answer; null when absent. Unique within a request.")
    instructions: Instructions = Field(description="The question, in plain words (a string or parts).")


class DecisionsPredicate(_Question):
    """Is the instruction true of the input? Answered with the probability of yes."""

    model_config = ConfigDict(title="predicate question")
    type: Literal["predicate"]


class ChoiceOption(Strict):
    value: Union[NonBlank, bool]
    description: NonBlank | None = None


class DecisionsChoice(_Question):
    """One of a fixed, unordered set of values."""

    model_config = ConfigDict(title="choice question")
    type: Literal["choice"]
    choices: Annotated[list[ChoiceOption], Field(min_length=MIN_CHOICE_OPTIONS, max_length=MAX_CHOICE_OPTIONS)]


class ScoreLevel(Strict):
    label: NonBlank
    description: NonBlank | None = None


class DecisionsScore(_Question):
    """A level of an ordered rubric, the first level lowest."""

    model_config = ConfigDict(title="score question")
    type: Literal["score"]
    levels: Annotated[list[ScoreLevel], Field(min_length=MIN_SCORE_LEVELS, max_length=MAX_SCORE_LEVELS)]


DecisionsQuestion = DecisionsPredicate | DecisionsChoice | DecisionsScore
Question = Annotated[Union[DecisionsPredicate, DecisionsChoice, DecisionsScore], Field(discriminator="type")]


class CacheOptions(Strict):
    mode: Literal["implicit", "explicit"] | None = None
    ttl: Literal["30m"] | None = None


class DecisionsRequest(Strict):
    """Typed questions about one input (the OpenAI Decisions API)."""

    model_config = ConfigDict(title="OpenAI Decisions request")
    model: str | None = Field(None, description="'jev-latest', the served model's name, or absent.")
    input: Input
    questions: Annotated[list[Question], Field(min_length=1, max_length=MAX_DECISION_QUESTIONS)]
    # OpenAI's own optional parameters: accepted, not used (safety_identifier is never logged).
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    prompt_cache_options: CacheOptions | None = None


# -- parsing ------------------------------------------------------------------------------------------


def _drop_tags(field: str | None) -> str | None:
    """pydantic names the union member it tried (``.str``, ``.list[...]``, ``.predicate``, ``.<user>``): not a
    field."""
    if not field:
        return field
    parts = [
        p
        for p in field.split(".")
        if not (p in ("str", "bool", "predicate", "choice", "score") or p.startswith(("list[", "function-", "<")))
    ]
    return ".".join(parts)


def _missing(field: str | None, error: ErrorDetails) -> AdapterError:
    return InvalidValue(f"{field} is required", field, code="missing_required_parameter")


def _extra(field: str | None, error: ErrorDetails) -> AdapterError:
    return InvalidValue(f"Unrecognized request argument supplied: {field}", field, code="unknown_parameter")


def _tag(field: str | None, error: ErrorDetails) -> AdapterError:
    value = error.get("input")
    field = _drop_tags(field)
    if not re.fullmatch(r"questions\[\d+\]", field or ""):
        return _part_tag(field, value)
    kind = value.get("type") if isinstance(value, dict) else None
    if not isinstance(value, dict):
        return InvalidType(f"{field} must be an object, a question", field, code="invalid_type")
    if "type" not in value:
        return InvalidValue(
            f"{field}.type is required: predicate, choice or score", f"{field}.type", code="missing_required_parameter"
        )
    return InvalidValue(f"{field}.type must be predicate, choice or score, got {render_json(kind)}", f"{field}.type")


def _part_tag(field: str | None, value: object) -> AdapterError:
    """An input item or a content part of no type this API reads."""
    if not isinstance(value, dict):
        return InvalidType(f"{field} must be an object, got {type_name(value)}", field, code="invalid_type")
    if field and re.fullmatch(r"input\[\d+\]", field):
        if "role" in value:
            return InvalidValue(
                f"{field}.role must be one of {', '.join(MESSAGE_ROLES)}, got {render_json(value['role'])}",
                f"{field}.role",
            )
        if "type" not in value:
            return InvalidValue(
                f"{field} needs a role (a message) or a type ({', '.join(ITEM_TYPES)})",
                f"{field}.type",
                code="missing_required_parameter",
            )
        return InvalidValue(
            f"{field}.type must be one of {', '.join(ITEM_TYPES)} (or a message with a role), got "
            f"{render_json(value['type'])}",
            f"{field}.type",
        )
    if "type" not in value:
        return InvalidValue(f"{field}.type is required", f"{field}.type", code="missing_required_parameter")
    return InvalidValue(f"{field}.type {render_json(value['type'])} is not a part this field takes", f"{field}.type")


def _literal(field: str | None, error: ErrorDetails) -> AdapterError | None:
    if error.get("input") == "input_image":
        return InvalidValue(
            f"{field}: images are not supported; this endpoint serves a text model (send input_text parts)",
            field,
            code="unsupported_content",
        )
    return None


_ALTERNATIVES = {"value": "a string or a boolean"}
WORDING: dict[str, ErrorWording] = {
    "missing": _missing,
    "extra_forbidden": _extra,
    "union_tag_invalid": _tag,
    "union_tag_not_found": _tag,
    "literal_error": _literal,
}


def parse_decisions(body: Any) -> DecisionsRequest:
    if not isinstance(body, dict):
        raise InvalidType("the body must be a JSON object", None)
    try:
        request = DecisionsRequest.model_validate(body)
    except ValidationError as exc:
        error = adapter_error(exc, messages=WORDING)
        field = _drop_tags(error.field)
        if field != error.field:
            leaf = (field or "").rpartition(".")[2]
            if isinstance(error, InvalidType) and leaf in _ALTERNATIVES:
                message = f"{field} must be {_ALTERNATIVES[leaf]}"
            else:
                message = error.message.replace(error.field or "", field or "", 1)
            error = type(error)(message, field, code=error.code)
        raise error from None
    _refuse_images(request)
    _check_calls(request.input)
    if not state_of(request).strip():
        raise InvalidValue("input holds no text; send the text the questions are about", "input")
    names: set[str] = set()
    for i, question in enumerate(request.questions):
        if question.name is not None:
            if question.name in names:
                raise InvalidValue(
                    f"questions[{i}].name {question.name!r} is used twice; names must be unique", f"questions[{i}].name"
                )
            names.add(question.name)
        if isinstance(question, DecisionsChoice):
            values = [option.value for option in question.choices]
            # true and "true" are different values (OpenAI tells booleans from strings)
            keys = [(type(v).__name__, v) for v in values]
            if len(set(keys)) != len(keys):
                raise InvalidValue(f"questions[{i}].choices: every value must be unique", f"questions[{i}].choices")
    return request


def parts_of(request: DecisionsRequest) -> Iterator[tuple[str, BaseModel]]:
    """(field path, part) of every part list in the request."""
    if isinstance(request.input, list):
        for i, item in enumerate(request.input):
            field = "content" if hasattr(item, "role") else "output"
            parts = getattr(item, field, None)
            if isinstance(parts, list):
                yield from ((f"input[{i}].{field}[{j}]", part) for j, part in enumerate(parts))
    for i, question in enumerate(request.questions):
        if isinstance(question.instructions, list):
            yield from ((f"questions[{i}].instructions[{j}]", part) for j, part in enumerate(question.instructions))


def _refuse_images(request: DecisionsRequest) -> None:
    for where, part in parts_of(request):
        if isinstance(part, ImagePart):
            raise InvalidValue(
                f"{where}: images are not supported; this endpoint reads text (send input_text or input_json parts)",
                f"{where}.type",
                code="unsupported_content",
            )


_OUTPUT_OF = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}


def _check_calls(items: str | list[Any]) -> None:
    """Every tool output names a call of its kind earlier in the input."""
    if isinstance(items, str):
        return
    calls: dict[str, set[str]] = {"function_call": set(), "custom_tool_call": set()}
    for i, item in enumerate(items):
        kind = None if hasattr(item, "role") else item.type
        if kind in calls:
            calls[kind].add(item.call_id)
        elif kind in _OUTPUT_OF and item.call_id not in calls[_OUTPUT_OF[kind]]:
            raise InvalidValue(
                f"input[{i}].call_id {item.call_id!r} names no {_OUTPUT_OF[kind]} before it in input; "
                f"put the {_OUTPUT_OF[kind]} with that call_id first",
                f"input[{i}].call_id",
            )


def _part_text(part: Any) -> str:
    if isinstance(part, JsonPart):
        return render_json(part.data)
    if isinstance(part, RefusalPart):
        return f"(refused) {part.refusal}"
    text: str = part.text
    return text


def _text(content: str | list[Any]) -> str:
    return content if isinstance(content, str) else "\n\n".join(_part_text(p) for p in content)


_SPEAKERS = {"system": "System", "developer": "Developer", "assistant": "Assistant"}


def _item_text(item: Any) -> str:
    """One input item as the state reads it: a user's text as it is, anything else under who said it."""
    role = getattr(item, "role", None)
    if role == "user":
        return _text(item.content)
    if role is not None:
        return f"{_SPEAKERS[role]}: {_text(item.content)}"
    name = f"{item.namespace}.{item.name}" if getattr(item, "namespace", None) else getattr(item, "name", None)
    if item.type == "function_call":
        return f"Function call {name} (call_id {item.call_id}): {item.arguments}"
    if item.type == "custom_tool_call":
        return f"Tool call {name} (call_id {item.call_id}): {item.input}"
    return f"Output of call_id {item.call_id}: {_text(item.output)}"


def state_of(request: DecisionsRequest) -> str:
    """The state every question reads: the input's items in order, separated by blank lines."""
    if isinstance(request.input, str):
        return request.input
    return "\n\n".join(_item_text(item) for item in request.input)


def instructions_of(question: DecisionsQuestion) -> str:
    return _text(question.instructions)


def check_model(requested: str | None, info: dict[str, Any], manifest: dict[str, Any] | None) -> None:
    if requested is None or requested in accepted_model_names(info, manifest):
        return
    raise ModelNotFound(
        f"The model {requested!r} does not exist here; send {served_model_name(info)!r} or leave model out",
        "model",
        code="model_not_found",
    )
