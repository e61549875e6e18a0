"""The OpenAI Decisions API on ``POST /v1/decisions`` (docs/api.md).

A request asks typed questions about one input::

    {"model": "jev-latest", "input": "The parcel never arrived; I want my money back.",
     "questions": [
       {"type": "predicate", "name": "refund", "instructions": "The customer asks for a refund."},
       {"type": "choice", "name": "team", "instructions": "Which team should handle it?",
        "choices": [{"value": "billing", "description": "Payments, refunds"}, {"value": "shipping"}]},
       {"type": "score", "name": "anger", "instructions": "How frustrated is the customer?",
        "levels": [{"label": "calm"}, {"label": "annoyed"}, {"label": "furious"}]}]}

``input`` is a string or a list of the items the ``openai`` library types: user, system, developer and
assistant messages (content a string or parts: ``input_text``, ``input_json``, an assistant's ``output_text``
and ``refusal``), function and custom tool calls and their outputs (an output must name an earlier call of
its kind). The items, in order and joined by blank lines, are the state: a user's text as it is, any other
item under who said it (``state_of``). Images are refused (a 400: this endpoint reads text). A question's
``instructions`` is a string or ``input_text`` / ``input_json`` parts; a request asks 1 to 400 questions. Each question becomes a decision prompt
over labelled options after the same state, so the state is evaluated once for the whole request,
exactly as System One questions are (a predicate's options are Yes and No; a score's its levels in
order). Answers come in question order, echoing ``name`` (null when the question has none):
predicate ``{probability}`` (of yes); choice ``{choice, confidence, probabilities: [{value,
probability}]}``; score ``{score, confidence, probabilities: [{value, label, probability}]}``, where
a level's value is its index (0 first) and ``score`` the expected value. ``usage`` counts the
tokens of every question's prompt (and of a content-free prior scored for the request) as
``input_tokens``, of which ``cached_tokens`` were not evaluated again because an earlier question of the
same request shared them; nothing is generated.

The API has no field for this adapter's options, so the order mode, the calibration and abstention
follow the server's settings (``DECISION_ADAPTER_ORDER``, calibration.json with a predicate's
profile ``noul/2``, ``DECISION_ADAPTER_MIN_ANSWER_MASS``). An abstention is the API's own refusal
answer ``{"type": "refusal", "name", "refusal"}`` (the text says why); its probabilities are not
given, as the API's refusal carries none.

Beside the API's fields every answer carries this adapter's ``x_readout``: ``letters`` or ``cloze``, the
readout that read it (the server's ``DECISION_ADAPTER_READOUT``; the API has no field to choose one). Where a
kept calibration profile's conformal threshold q applied, a predicate, choice or score answer also carries
``x_prediction_set``: in request order, the answers whose probability is at least 1 - q, named as the API
names them (a predicate's ``true`` for yes and ``false`` for no, a choice's values, a score's level values).
``model`` stays the served model's name, as the API types it. The ``openai`` library keeps fields it does not
know, so its ``Decision`` type parses these answers unchanged.

Errors: ``{"error": {"message", "type", "param", "code"}}``; anything wrong with the body is a 400
``invalid_request_error`` whose ``param`` names the field (e.g. ``questions[1].choices``), unknown
fields included (as OpenAI refuses unrecognised arguments).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from flask import Blueprint
from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError

from .. import scoring
from ..errors import AdapterError, InvalidType, InvalidValue, ModelNotFound, PromptTooLong
from ..prompt import JEV_PROMPT, YES_NO, as_text, option_text, render_json
from ..questions import MAX_CHOICE_OPTIONS, MAX_DECISION_QUESTIONS, MAX_SCORE_LEVELS, MIN_CHOICE_OPTIONS, MIN_SCORE_LEVELS, \
    DecisionBatch, Option
from ..questions import Question as CoreQuestion
from . import openapi_parts as doc
from .api import Api, Scope
from .common import TAG_LIST, TAG_STRING, Answer, NonBlank, Strict, adapter_error, string_or_list, type_name
from .dialect import Dialect, post
from .typed import accepted_model_names, choice_confidence, score_confidence, served_model_name, unit
from .typed import names_checked

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


def _by_type(*members):
    """A union of part or item models told apart by their ``type`` (or a message's ``role``); the tags are
    bracketed so they never read as field names in an error's path."""
    def kind(value):
        if not isinstance(value, dict):
            return None
        key = value.get("role") if "role" in value else value.get("type")
        return f"<{key}>" if isinstance(key, str) else None

    return Annotated[Union[tuple(Annotated[m, Tag(f"<{t}>")] for t, m in members)],
                     Discriminator(kind)]


InputPart = _by_type(("input_text", TextPart), ("input_json", JsonPart), ("input_image", ImagePart))
TextOnlyPart = _by_type(("input_text", TextPart))
AssistantPart = _by_type(("output_text", OutputTextPart), ("refusal", RefusalPart))
OutputPart = _by_type(("input_text", TextPart), ("input_image", ImagePart))


def _content(part, what: str):
    return Annotated[Union[Annotated[str, Tag(TAG_STRING)], Annotated[list[part], Field(min_length=1), Tag(TAG_LIST)]],
                     string_or_list(what)]


class _Message(Strict):
    """A message item: its role and content are each subclass's own."""
    type: Literal["message"] | None = None


class UserMessage(_Message):
    role: Literal["user"]
    content: _content(InputPart, "a string or a list of input_text / input_json parts")


class SystemMessage(_Message):
    role: Literal["system"]
    content: _content(TextOnlyPart, "a string or a list of input_text parts")


class DeveloperMessage(_Message):
    role: Literal["developer"]
    content: _content(TextOnlyPart, "a string or a list of input_text parts")


class AssistantMessage(_Message):
    role: Literal["assistant"]
    content: _content(AssistantPart, "a string or a list of output_text / refusal parts")
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
    output: _content(OutputPart, "a string or a list of input_text parts")


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


INPUT_ITEMS = (("user", UserMessage), ("system", SystemMessage), ("developer", DeveloperMessage),
               ("assistant", AssistantMessage), ("function_call", FunctionCall),
               ("function_call_output", FunctionCallOutput), ("custom_tool_call", CustomToolCall),
               ("custom_tool_call_output", CustomToolCallOutput))
InputItem = _by_type(*INPUT_ITEMS)
MESSAGE_ROLES = ("user", "system", "developer", "assistant")
ITEM_TYPES = tuple(t for t, _ in INPUT_ITEMS if t not in MESSAGE_ROLES)

Input = Annotated[Union[Annotated[NonBlank, Tag(TAG_STRING)],
                        Annotated[list[InputItem], Field(min_length=1), Tag(TAG_LIST)]],
                  string_or_list("a string or a list of messages and tool calls")]
QuestionPart = _by_type(("input_text", TextPart), ("input_json", JsonPart), ("input_image", ImagePart))
Instructions = Annotated[Union[Annotated[NonBlank, Tag(TAG_STRING)],
                               Annotated[list[QuestionPart], Field(min_length=1), Tag(TAG_LIST)]],
                         string_or_list("a string or a list of input_text / input_json parts")]
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
    parts = [p for p in field.split(".") if not (p in ("str", "bool", "predicate", "choice", "score")
                                                  or p.startswith(("list[", "function-", "<")))]
    return ".".join(parts)


def _missing(field, error):
    return InvalidValue(f"{field} is required", field, code="missing_required_parameter")


def _extra(field, error):
    return InvalidValue(f"Unrecognized request argument supplied: {field}", field, code="unknown_parameter")


def _tag(field, error):
    value = error.get("input")
    field = _drop_tags(field)
    if not re.fullmatch(r"questions\[\d+\]", field or ""):
        return _part_tag(field, value)
    kind = value.get("type") if isinstance(value, dict) else None
    if not isinstance(value, dict):
        return InvalidType(f"{field} must be an object, a question", field, code="invalid_type")
    if "type" not in value:
        return InvalidValue(f"{field}.type is required: predicate, choice or score", f"{field}.type",
                            code="missing_required_parameter")
    return InvalidValue(f"{field}.type must be predicate, choice or score, got {render_json(kind)}", f"{field}.type")


def _part_tag(field, value):
    """An input item or a content part of no type this API reads."""
    if not isinstance(value, dict):
        return InvalidType(f"{field} must be an object, got {type_name(value)}", field, code="invalid_type")
    if field and re.fullmatch(r"input\[\d+\]", field):
        if "role" in value:
            return InvalidValue(f"{field}.role must be one of {', '.join(MESSAGE_ROLES)}, got "
                                f"{render_json(value['role'])}", f"{field}.role")
        if "type" not in value:
            return InvalidValue(f"{field} needs a role (a message) or a type ({', '.join(ITEM_TYPES)})",
                                f"{field}.type", code="missing_required_parameter")
        return InvalidValue(f"{field}.type must be one of {', '.join(ITEM_TYPES)} (or a message with a role), got "
                            f"{render_json(value['type'])}", f"{field}.type")
    if "type" not in value:
        return InvalidValue(f"{field}.type is required", f"{field}.type", code="missing_required_parameter")
    return InvalidValue(f"{field}.type {render_json(value['type'])} is not a part this field takes", f"{field}.type")


def _literal(field, error):
    if error.get("input") == "input_image":
        return InvalidValue(f"{field}: images are not supported; this endpoint serves a text model (send "
                            "input_text parts)", field, code="unsupported_content")
    return None


_ALTERNATIVES = {"value": "a string or a boolean"}
WORDING = {"missing": _missing, "extra_forbidden": _extra, "union_tag_invalid": _tag, "union_tag_not_found": _tag,
           "literal_error": _literal}


def parse_decisions(body) -> DecisionsRequest:
    if not isinstance(body, dict):
        raise InvalidType("the body must be a JSON object", None)
    try:
        request = DecisionsRequest.model_validate(body)
    except ValidationError as exc:
        error = adapter_error(exc, messages=WORDING)
        field = _drop_tags(error.field)
        if field != error.field:
            if isinstance(error, InvalidType) and field.rpartition(".")[2] in _ALTERNATIVES:
                message = f"{field} must be {_ALTERNATIVES[field.rpartition('.')[2]]}"
            else:
                message = error.message.replace(error.field or "", field or "", 1)
            error = type(error)(message, field, code=error.code)
        raise error from None
    _refuse_images(request)
    _check_calls(request.input)
    if not state_of(request).strip():
        raise InvalidValue("input holds no text; send the text the questions are about", "input")
    names = set()
    for i, question in enumerate(request.questions):
        if question.name is not None:
            if question.name in names:
                raise InvalidValue(f"questions[{i}].name {question.name!r} is used twice; names must be unique",
                                   f"questions[{i}].name")
            names.add(question.name)
        if isinstance(question, DecisionsChoice):
            values = [option.value for option in question.choices]
            # true and "true" are different values (OpenAI tells booleans from strings)
            keys = [(type(v).__name__, v) for v in values]
            if len(set(keys)) != len(keys):
                raise InvalidValue(f"questions[{i}].choices: every value must be unique", f"questions[{i}].choices")
    return request


def _parts_of(request: DecisionsRequest):
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
    for where, part in _parts_of(request):
        if isinstance(part, ImagePart):
            raise InvalidValue(f"{where}: images are not supported; this endpoint reads text (send input_text "
                               "or input_json parts)", f"{where}.type", code="unsupported_content")


_OUTPUT_OF = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}


def _check_calls(items) -> None:
    """Every tool output names a call of its kind earlier in the input."""
    if isinstance(items, str):
        return
    calls: dict[str, set[str]] = {"function_call": set(), "custom_tool_call": set()}
    for i, item in enumerate(items):
        kind = None if hasattr(item, "role") else item.type
        if kind in calls:
            calls[kind].add(item.call_id)
        elif kind in _OUTPUT_OF and item.call_id not in calls[_OUTPUT_OF[kind]]:
            raise InvalidValue(f"input[{i}].call_id {item.call_id!r} names no {_OUTPUT_OF[kind]} before it in input; "
                               f"put the {_OUTPUT_OF[kind]} with that call_id first", f"input[{i}].call_id")


def _part_text(part) -> str:
    if isinstance(part, JsonPart):
        return render_json(part.data)
    if isinstance(part, RefusalPart):
        return f"(refused) {part.refusal}"
    return part.text


def _text(content) -> str:
    return content if isinstance(content, str) else "\n\n".join(_part_text(p) for p in content)


_SPEAKERS = {"system": "System", "developer": "Developer", "assistant": "Assistant"}


def _item_text(item) -> str:
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


def instructions_of(question) -> str:
    return _text(question.instructions)


def check_model(requested: str | None, info: dict, manifest: dict | None) -> None:
    if requested is None or requested in accepted_model_names(info, manifest):
        return
    raise ModelNotFound(f"The model {requested!r} does not exist here; send {served_model_name(info)!r} or leave "
                        "model out", "model", code="model_not_found")


# -- questions and answers ------------------------------------------------------------------------------


def option_texts(question) -> list[str]:
    if isinstance(question, DecisionsPredicate):
        return list(YES_NO)
    if isinstance(question, DecisionsChoice):
        return [option_text(as_text(o.value), o.description) for o in question.choices]
    return [option_text(level.label, level.description) for level in question.levels]


def cloze_texts(question) -> list[str]:
    """What the cloze readout scores: yes and no; a choice's description, else its value made readable; a
    score's level labels."""
    if isinstance(question, DecisionsPredicate):
        return [label.lower() for label in YES_NO]
    if isinstance(question, DecisionsChoice):
        return [as_text(o.value).replace("_", " ") if not o.description else as_text(o.description)
                for o in question.choices]
    return [level.label for level in question.levels]


QUESTION_TYPES = {"predicate": "noul", "choice": "choice", "score": "score"}  # the calibration profiles' names


def batch_of(request: DecisionsRequest) -> DecisionBatch:
    """The request as the core's questions, in the server's order mode and abstention threshold (the API has
    no field for them); an error about a question or its options points at the question."""
    questions = []
    for i, q in enumerate(request.questions):
        loc = ("body", "questions", i)
        options = tuple(Option(str(j), text, cloze)
                        for j, (text, cloze) in enumerate(zip(option_texts(q), cloze_texts(q))))
        questions.append(CoreQuestion(str(i), instructions_of(q), options, question_type=QUESTION_TYPES[q.type], loc=loc,
                                      options_loc=loc))
    return DecisionBatch("decisions", state_of(request), tuple(questions), state_field="input")


def score(engine, request: DecisionsRequest) -> tuple[list[dict], dict]:
    """Every question in the server's order mode, calibrated, with the server's abstention threshold."""
    return scoring.decide(engine, batch_of(request), JEV_PROMPT)


def values_of(question) -> list:
    """What a prediction set names, in request order: a predicate's true (yes) and false (no), a choice's
    values, a score's level values (indices)."""
    if isinstance(question, DecisionsPredicate):
        return [True, False]
    if isinstance(question, DecisionsChoice):
        return [o.value for o in question.choices]
    return list(range(len(question.levels)))


def extensions(question, result: dict) -> dict:
    """This adapter's fields beside the API's: the readout that read the answer, and the prediction set where a
    kept calibration threshold applied."""
    out, members = {"x_readout": result["readout_name"]}, result.get("prediction_set")
    if members is not None:
        values = values_of(question)
        out["x_prediction_set"] = [values[i] for i in members]
    return out


def answer(question, result: dict) -> dict:
    if result.get("abstained"):
        return {"type": "refusal", "name": question.name,
                "refusal": f"the answer labels held {result['allowed_token_mass']:.3g} of the model's next-token "
                           f"probability, below this endpoint's threshold {result['min_answer_mass']:g} "
                           "(DECISION_ADAPTER_MIN_ANSWER_MASS)",
                "x_readout": result["readout_name"]}
    p = result["probabilities"]
    if isinstance(question, DecisionsPredicate):
        return {"type": "predicate", "name": question.name, "probability": unit(p[0]),
                **extensions(question, result)}
    if isinstance(question, DecisionsChoice):
        top = max(range(len(p)), key=p.__getitem__)  # the first option on a tie
        return {"type": "choice", "name": question.name, "choice": question.choices[top].value,
                "confidence": choice_confidence(p),
                "probabilities": [{"value": o.value, "probability": v} for o, v in zip(question.choices, p)],
                **extensions(question, result)}
    return {"type": "score", "name": question.name, "score": sum(i * v for i, v in enumerate(p)),
            "confidence": score_confidence(p),
            "probabilities": [{"value": i, "label": level.label, "probability": v}
                              for i, (level, v) in enumerate(zip(question.levels, p))],
            **extensions(question, result)}


def respond(request: DecisionsRequest, results: list[dict], timing: dict, info: dict) -> dict:
    # A content-free prior scored for this request (order mode prior, first use) is paid for here too.
    prompt_tokens = sum(r["read_tokens"] for r in results) + timing["prior_tokens"]
    evaluated = int(timing["input_tokens"])
    return {"model": served_model_name(info),
            "answers": [answer(q, r) for q, r in zip(request.questions, results)],
            "usage": {"input_tokens": prompt_tokens,
                      "input_tokens_details": {"cached_tokens": max(0, prompt_tokens - evaluated),
                                               "cache_write_tokens": 0},
                      "output_tokens": 0, "output_tokens_details": {"reasoning_tokens": 0},
                      "total_tokens": prompt_tokens}}


# -- errors ---------------------------------------------------------------------------------------------

_CODES = {401: "invalid_api_key", 413: "request_too_large", 415: "unsupported_media_type", 503: "server_busy",
          504: "timeout"}


def error_body(exc: AdapterError) -> tuple[dict, int]:
    """OpenAI's error object; every problem with the body is a 400, as OpenAI sends them."""
    status = 400 if isinstance(exc, (InvalidType, InvalidValue, PromptTooLong)) else exc.status
    kind = "server_error" if status >= 500 else "invalid_request_error"
    code = exc.code
    if isinstance(exc, PromptTooLong):
        code = "context_length_exceeded"
    elif status in _CODES and not isinstance(exc, (InvalidType, InvalidValue)):
        code = exc.code if exc.code in ("busy", "not_ready") else _CODES[status]
    param = exc.field
    if param is None and exc.loc:
        param = "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i > 1 else str(p))
                        for i, p in enumerate(exc.loc) if i > 0) or None
    return {"error": {"message": exc.message, "type": kind, "param": param, "code": code}}, status


# -- the dialect and its route -------------------------------------------------------------------------


def parse(body, settings) -> DecisionsRequest:
    return parse_decisions(body)


def check(request: DecisionsRequest, engine) -> None:
    """The model's name, before the request waits for the model."""
    if names_checked(engine):
        check_model(request.model, engine.info, engine.model_files.manifest)


DIALECT = Dialect("decisions", parse, score, respond, error_body, check)


PATH = "/v1/decisions"
blueprint = Blueprint("decisions", __name__)
post(blueprint, PATH, DIALECT)


def openapi_paths() -> dict:
    """Its path of the OpenAPI document (openapi.py)."""
    return {
        PATH: {"post": {
            "operationId": "decisions", "tags": ["OpenAI"],
            "summary": "Answer predicate, choice and score questions about one input (OpenAI Decisions API)",
            "description": "The OpenAI Decisions API on the same model and readout as System One: answers in "
                           "question order, nothing generated. Errors use OpenAI's {\"error\": {message, type, "
                           "param, code}}; anything wrong with the body (" + doc.UNREADABLE.rstrip(".") + "; wrong "
                           "types, unknown fields, values out of range, a prompt too long) is a 400 whose param "
                           "names the field.",
            "requestBody": doc.body("DecisionsRequest"),
            "responses": {
                "200": doc.ok("One answer per question, in question order.", "DecisionsResponse"),
                "400": doc.response("The body cannot be served; param names the field.", doc.openai(
                    "invalid_type", "invalid_value", "missing_required_parameter", "unknown_parameter",
                    "unsupported_content", "context_length_exceeded", "bad_request")),
                "404": doc.response("Only with DECISION_ADAPTER_STRICT_MODEL_NAMES=on: the request names a model "
                                    "this endpoint does not serve.", doc.openai("model_not_found")),
                **doc.common("Decisions")}}}}


API = Api("openai_decisions", "openai_decisions", body=DIALECT,
          sniff=lambda body: "input" in body and isinstance(body.get("questions"), list),
          routes=(f"POST {PATH}",), blueprint=blueprint, scope=Scope(PATH, under=True), errors=DIALECT,
          shape="decisions", openapi=openapi_paths)


# -- answers and errors, described ------------------------------------------------------------------

Probability = Annotated[float, Field(ge=0, le=1)]
ReadoutUsed = Annotated[Literal["letters", "cloze"], Field(
    description="This adapter's extension: the readout that read the answer (DECISION_ADAPTER_READOUT).")]
SET_DESCRIPTION = ("This adapter's extension, only where a kept calibration threshold q applied (as the own "
                   "schema's prediction_set): the {what} whose probability is at least 1 - q, in request order.")


class DecisionsPredicateAnswer(BaseModel):
    model_config = ConfigDict(title="predicate answer")
    type: Literal["predicate"]
    name: str | None
    probability: Probability = Field(description="The probability that the predicate holds (yes).")
    x_readout: ReadoutUsed
    x_prediction_set: list[bool] | None = Field(None, description=SET_DESCRIPTION.format(
        what="answers (true: yes, false: no)"))


class DecisionsChoiceProbability(BaseModel):
    value: str | bool
    probability: Probability


class DecisionsChoiceAnswer(BaseModel):
    model_config = ConfigDict(title="choice answer")
    type: Literal["choice"]
    name: str | None
    choice: str | bool = Field(description="The most probable value.")
    confidence: Probability
    probabilities: list[DecisionsChoiceProbability] = Field(description="One per choice, in the order sent.")
    x_readout: ReadoutUsed
    x_prediction_set: list[str | bool] | None = Field(None, description=SET_DESCRIPTION.format(what="values"))


class DecisionsScoreProbability(BaseModel):
    value: int = Field(ge=0, description="The level's index, 0 first.")
    label: str
    probability: Probability


class DecisionsScoreAnswer(BaseModel):
    model_config = ConfigDict(title="score answer")
    type: Literal["score"]
    name: str | None
    score: float = Field(ge=0, description="The expected level index: the sum of value * probability.")
    confidence: Probability
    probabilities: list[DecisionsScoreProbability] = Field(description="One per level, in order.")
    x_readout: ReadoutUsed
    x_prediction_set: list[Annotated[int, Field(ge=0)]] | None = Field(None, description=SET_DESCRIPTION.format(
        what="levels' values"))


class DecisionsRefusalAnswer(BaseModel):
    model_config = ConfigDict(title="refusal answer")
    type: Literal["refusal"]
    name: str | None
    refusal: str | None = Field(None, description="Why: the answer labels held less of the next-token probability "
                                                  "than DECISION_ADAPTER_MIN_ANSWER_MASS.")
    x_readout: ReadoutUsed


class InputTokensDetails(BaseModel):
    cached_tokens: int = Field(ge=0, description="Input tokens an earlier question of this request had evaluated.")
    cache_write_tokens: int = Field(ge=0)


class OutputTokensDetails(BaseModel):
    reasoning_tokens: int = Field(ge=0)


class DecisionsUsage(BaseModel):
    input_tokens: int = Field(ge=0)
    input_tokens_details: InputTokensDetails
    output_tokens: int = Field(ge=0)
    output_tokens_details: OutputTokensDetails
    total_tokens: int = Field(ge=0)


class DecisionsResponse(Answer):
    model_config = ConfigDict(title="OpenAI Decisions answer")
    model: str = Field(description="The served model's name (the GGUF file name without .gguf).")
    answers: list[Annotated[Union[DecisionsPredicateAnswer, DecisionsChoiceAnswer, DecisionsScoreAnswer,
                                  DecisionsRefusalAnswer], Field(discriminator="type")]] = Field(
        min_length=1, description="One answer per question, in question order.")
    usage: DecisionsUsage


class OpenAIErrorDetail(BaseModel):
    message: str
    type: Literal["invalid_request_error", "server_error"]
    param: str | None
    code: str | None


class OpenAIError(BaseModel):
    """OpenAI's error shape."""

    error: OpenAIErrorDetail
