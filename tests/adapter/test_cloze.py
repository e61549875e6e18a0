"""The cloze readout (issue #37): each option's own text scored as what follows the state and the question,
on the embedded model (trim) and on the hybrid test GGUF (restore). In-process engines; no adapter process.

Mechanics only (the tiny model has no signal): probabilities sum to 1; listing the options in another order
changes nothing; an option's score is its continuation's log-probability as an empty context reads it;
a batch answers as its questions asked alone; the content-free prior cache keeps its bound and its tokens
are paid by the request that first needs them; bad combinations are 400s naming the field.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from decision_adapter import scoring
from decision_adapter.apis import own
from decision_adapter.apis.own import parse_decision
from decision_adapter.caller_errors import AdapterError
from decision_adapter.readout_cloze import cloze_text
from decision_adapter.scores import logsumexp
from scripts.hybrid_gguf import write_hybrid_gguf
from tests.support import adapter_settings

STATE = "Order 4411: the parcel arrived with a cracked screen. The customer wants a replacement or the money back."
ROUTE = [
    {"id": "refunds", "text": "Refunds and returns"},
    {"id": "shipping", "text": "Shipping and delivery"},
    {"id": "sales_team"},
]
QUESTIONS = [
    {"id": "route", "question": "Which team should handle this?", "options": ROUTE},
    {"id": "damaged", "question": "Was the item damaged?", "options": ["no", "yes"]},
    {
        "id": "tone",
        "question": "How does the customer sound?",
        "options": [{"id": "calm", "text": "Calm"}, {"id": "angry", "text": "Very angry indeed"}],
    },
]


def single(question: dict, **fields) -> object:
    return parse_decision(
        {"id": "d1", "state": STATE, **{k: v for k, v in question.items() if k != "id"}, "readout": "cloze", **fields}
    )


def decide(engine, body):
    (result,) = own.results(body, own.decide(engine, body)[0])
    return result


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory):
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model

    folder = tmp_path_factory.mktemp("hybrid-cloze")
    write_hybrid_gguf(folder / "hybrid-qwen35.gguf")
    engine = Engine(adapter_settings(folder, DECISION_ADAPTER_PREFIX_REUSE="auto"), locate_model(folder))
    engine.prove()
    return engine


@pytest.fixture(params=["embedded", "hybrid"])
def any_engine(request, engine):
    # Without flash attention (the default): the option's own evaluation is held to the prompt and option
    # evaluated whole, which flash attention's kernels make differ a little (test_flash_attention.py).
    return engine if request.param == "embedded" else request.getfixturevalue("hybrid")


@pytest.fixture(scope="module")
def whole_readers():
    """Per engine, a second load of its GGUF with llama-cpp-python's ``logits_all``: nothing of the engine's
    own evaluation path (prefix reuse, saved states, the readout's evaluations) is used by the reference."""
    import llama_cpp

    from decision_adapter import runtime

    readers = {}

    def reader(engine):
        if id(engine) not in readers:
            with runtime.context_params(
                llama_cpp, flash_attn_type=runtime.FLASH_ATTN_TYPES[engine.context.flash_attention]
            ):
                readers[id(engine)] = llama_cpp.Llama(
                    model_path=str(engine.model.files.gguf),
                    logits_all=True,
                    verbose=False,
                    **{**engine.settings.llama_kwargs(), "n_ctx": 512},
                )
        return readers[id(engine)]

    yield reader
    for llm in readers.values():
        llm.close()


def reference_log_prob(llm, prompt_tokens: list[int], continuation: tuple[int, ...]) -> float:
    """The continuation's summed log-probability read from an empty context: the prompt and the continuation
    evaluated whole in one evaluation, each token's log-probability read at the position before it."""
    llm.reset()
    llm.eval(list(prompt_tokens) + list(continuation))
    total = 0.0
    for at, token in enumerate(continuation):
        logits = llm.scores[len(prompt_tokens) - 1 + at]
        total += float(logits[token]) - logsumexp(logits)
    return total


@pytest.mark.parametrize("normalize", ["pmi", "sum", "mean"])
def test_probabilities_are_a_distribution_in_request_order(any_engine, normalize):
    result = decide(any_engine, single(QUESTIONS[0], normalize=normalize))
    p = np.array(result["probabilities"])
    assert result["option_ids"] == ["refunds", "shipping", "sales_team"]
    assert p.shape == (3,) and np.all(p > 0) and math.isclose(p.sum(), 1.0, abs_tol=1e-9)
    logits = np.array(result["option_logits"])
    assert np.allclose(np.exp(logits - logits.max()) / np.exp(logits - logits.max()).sum(), p)
    assert result["readout_name"] == "cloze" and result["normalize"] == normalize
    assert len(result["option_tokens"]) == 3 and all(n >= 1 for n in result["option_tokens"])
    assert result["order"] == "as_given" and 0 < result["allowed_token_mass"] <= 1


def test_the_answer_does_not_depend_on_the_order_of_the_options(any_engine):
    forward = decide(any_engine, single(QUESTIONS[0]))
    reversed_ = decide(any_engine, single({**QUESTIONS[0], "options": ROUTE[::-1]}))
    back = dict(zip(reversed_["option_ids"], reversed_["probabilities"]))
    assert np.allclose([back[i] for i in forward["option_ids"]], forward["probabilities"], rtol=0, atol=1e-6)
    assert forward["prompt_sha256"] == reversed_["prompt_sha256"]


def test_each_score_is_its_continuation_read_from_an_empty_context(any_engine, whole_readers):
    batch = single(QUESTIONS[2], normalize="sum")
    result = decide(any_engine, batch)
    question = batch.questions[0]
    prompt = any_engine.model.prompt_tokens(any_engine.model.template.render_cloze(STATE, question.question))
    for option, score, n in zip(question.options, result["option_logits"], result["option_tokens"]):
        continuation = any_engine.model.continuation_tokens(cloze_text(option))
        assert len(continuation) == n
        assert math.isclose(score, reference_log_prob(whole_readers(any_engine), prompt, continuation), abs_tol=1e-4)
    mean = decide(any_engine, single(QUESTIONS[2], normalize="mean"))
    assert np.allclose(mean["option_logits"], np.array(result["option_logits"]) / result["option_tokens"], atol=1e-9)


LONG = {
    "id": "long",
    "question": "What should the agent do next?",
    "options": [
        {"id": "short", "text": "Wait"},
        {"id": "medium", "text": "Apologise, then offer a replacement screen shipped by express courier today"},
        {
            "id": "long",
            "text": "Open a damage claim with the carrier, attach the customer's photographs of the cracked "
            "screen and the packaging, refund the order in full to the original card, and tell the "
            "customer by email that no return of the broken device is needed",
        },
    ],
}


def test_an_option_of_many_tokens_reads_as_the_whole_text_does(any_engine, whole_readers):
    """An option's tokens are evaluated together from the prompt: the log-probabilities of the prompt and the
    option read in one evaluation, past the 32 tokens at which llama.cpp issue 24962 saw CPU kernels change."""
    batch = single(LONG, normalize="sum")
    (result,), _ = scoring.decide(any_engine, batch)
    question = batch.questions[0]
    prompt = any_engine.model.prompt_tokens(any_engine.model.template.render_cloze(STATE, question.question))
    assert result.extras["option_tokens"][0] == 1 and result.extras["option_tokens"][2] > 32
    for option, score in zip(question.options, result.option_logits):
        reference = reference_log_prob(
            whole_readers(any_engine), prompt, any_engine.model.continuation_tokens(cloze_text(option))
        )
        assert math.isclose(score, reference, abs_tol=1e-4)
    assert result.forward_passes == 1 + 2  # the prompt, then one evaluation per option of several tokens
    # each option's tokens but its last, and never one token alone: an option of two is evaluated whole
    assert result.read_tokens == len(prompt) + sum(
        n - 1 if n > 2 else 2 * (n == 2) for n in result.extras["option_tokens"]
    )


def test_a_batch_answers_as_its_questions_asked_alone(any_engine):
    batch = parse_decision({"id": "b1", "state": STATE, "readout": "cloze", "questions": QUESTIONS})
    together = own.results(batch, own.decide(any_engine, batch)[0])
    for question, answer in zip(QUESTIONS, together):
        alone = decide(any_engine, single(question))
        assert np.allclose(answer["probabilities"], alone["probabilities"], rtol=0, atol=1e-4)
        assert np.allclose(answer["option_logits"], alone["option_logits"], rtol=0, atol=1e-4)


def test_readout_per_question_of_a_batch(engine):
    batch = parse_decision(
        {"id": "b1", "state": STATE, "questions": [{**QUESTIONS[0], "readout": "cloze"}, QUESTIONS[1]]}
    )
    first, second = own.answered(engine, batch)[0]
    assert first["readout_name"] == "cloze" and "readout_name" not in second
    assert second["answer_slots"] == ["A", "B"]


def test_option_text_is_the_description_else_the_id_made_readable():
    from decision_adapter.questions import Option

    assert cloze_text(Option("sales_team", "sales_team")) == "sales team"
    assert cloze_text(Option("x", "Refunds and returns")) == "Refunds and returns"
    assert cloze_text(Option("yes", "Yes", cloze="yes")) == "yes"


def test_the_prior_cache_keeps_its_bound_and_is_paid_for_once(embedded_gguf, tmp_path):
    from decision_adapter.engine import Engine
    from decision_adapter.model_files import locate_model
    from workshop_lib.models import EMBEDDED_MODEL
    from workshop_lib.packaging import extract_model, package_local

    package = package_local(EMBEDDED_MODEL, {EMBEDDED_MODEL.gguf.path: embedded_gguf}, tmp_path / "package")
    folder = extract_model(package.tarball, tmp_path / "model")
    small = Engine(adapter_settings(folder, DECISION_ADAPTER_CLOZE_PRIOR_CACHE="2"), locate_model(folder))
    _, paid = scoring.decide(small, single(QUESTIONS[0]))
    assert len(small.priors.cloze) == 2 and paid["prior_tokens"] > 0
    assert paid["input_tokens"] > paid["prior_tokens"]
    small.priors.cloze.size = 8
    _, first = scoring.decide(small, single(QUESTIONS[1]))
    _, again = scoring.decide(small, single(QUESTIONS[1]))
    assert first["prior_tokens"] > 0 and again["prior_tokens"] == 0
    assert first["input_tokens"] - again["input_tokens"] == first["prior_tokens"]
    _, plain = scoring.decide(small, single(QUESTIONS[1], normalize="sum"))
    assert plain["prior_tokens"] == 0 and plain["input_tokens"] == again["input_tokens"]
    assert len(small.priors.cloze) <= 8


def test_with_no_prior_cache_every_request_pays_its_priors_and_answers_the_same(engine, monkeypatch):
    """``DECISION_ADAPTER_CLOZE_PRIOR_CACHE=0``: nothing kept between requests, so a question asked before costs
    what a new one does; within a request, questions of the same wording still share their priors."""
    from decision_adapter.priors import PriorCache

    monkeypatch.setattr(engine.priors, "cloze", PriorCache(0))
    _, first = scoring.decide(engine, single(QUESTIONS[0]))
    answers, again = scoring.decide(engine, single(QUESTIONS[0]))
    assert (
        first["prior_tokens"] > 0 and again["prior_tokens"] == first["prior_tokens"] and len(engine.priors.cloze) == 0
    )
    twice = parse_decision(
        {
            "id": "b1",
            "state": STATE,
            "readout": "cloze",
            "questions": [QUESTIONS[0], {**QUESTIONS[0], "id": "route_again"}],
        }
    )
    both, paid = scoring.decide(engine, twice)
    assert paid["prior_tokens"] == first["prior_tokens"]
    monkeypatch.setattr(engine.priors, "cloze", PriorCache(8))
    cached, _ = scoring.decide(engine, single(QUESTIONS[0]))
    assert np.allclose(answers[0].probabilities, cached[0].probabilities, rtol=0, atol=1e-9)
    assert all(np.allclose(b.probabilities, cached[0].probabilities, rtol=0, atol=1e-4) for b in both)


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"order": "rotations"}, "order"),
        ({"order": "prior"}, "order"),
        ({"normalize": "softmax"}, "normalize"),
        ({"readout": "words"}, "readout"),
    ],
)
def test_bad_combinations_are_400s_naming_the_field(fields, field):
    with pytest.raises(AdapterError) as caught:
        single(QUESTIONS[0], **fields)
    assert caught.value.status == 400 and caught.value.field == field


def test_a_batch_question_at_fault_is_named_by_its_path():
    body = {
        "id": "b1",
        "state": STATE,
        "readout": "cloze",
        "questions": [QUESTIONS[1], {**QUESTIONS[0], "order": "prior"}],
    }
    with pytest.raises(AdapterError) as caught:
        parse_decision(body)
    assert caught.value.status == 400 and caught.value.field == "questions[1].order"
    with pytest.raises(AdapterError) as caught:
        parse_decision({**body, "questions": QUESTIONS[:1], "order": "rotations"})
    assert caught.value.field == "order"


def test_a_cloze_server_refuses_an_order_that_moves_options(engine, monkeypatch):
    monkeypatch.setattr(engine, "settings", dataclasses.replace(engine.settings, readout="cloze"))
    batch = parse_decision(
        {"id": "d1", "state": STATE, **{k: v for k, v in QUESTIONS[0].items() if k != "id"}, "order": "rotations"}
    )
    with pytest.raises(AdapterError) as caught:
        own.decide(engine, batch)
    assert caught.value.status == 400 and caught.value.field == "order"
    result = decide(engine, parse_decision({"id": "d1", "state": STATE, "question": "Which?", "options": ["a", "b"]}))
    assert result["readout_name"] == "cloze"


# -- every API (in-process: its parser, the core, its answer) ------------------------------------------------

JEV_BODY = {
    "state": STATE,
    "x_readout": "cloze",
    "questions": {
        "damaged": {"type": "noul", "instructions": "Was the item damaged?"},
        "team": {
            "type": "choice",
            "instructions": "Which team?",
            "criteria": {"refunds": "Refunds and returns", "shipping_desk": None},
        },
        "tone": {
            "type": "score",
            "instructions": "How upset is the customer?",
            "criteria": ["calm", "upset", "furious"],
        },
    },
}


def test_system_one_takes_x_readout_and_reports_it(engine):
    from decision_adapter.apis import systemone as jev
    from decision_adapter.apis.systemone_requests import parse_systemone

    request = parse_systemone(JEV_BODY)
    batch = jev.batch_of(request)
    assert [cloze_text(o) for o in batch.questions[0].options] == ["yes", "no"]
    assert [cloze_text(o) for o in batch.questions[1].options] == ["Refunds and returns", "shipping desk"]
    assert [cloze_text(o) for o in batch.questions[2].options] == ["calm", "upset", "furious"]
    results, timing = jev.score(engine, request)
    body = jev.respond(request, results, timing, engine.info)
    for key, n in (("damaged", 2), ("team", 2), ("tone", 3)):
        answer = body["answers"][key]
        assert answer["x_readout"] == "cloze" and answer["x_normalize"] == "pmi" and len(answer["x_option_tokens"]) == n
    assert math.isclose(sum(body["answers"]["tone"]["probabilities"].values()), 1.0, abs_tol=1e-9)
    assert "cloze" in body["x_readout_methods"] and body["x_model"]["readout"] == "letters"
    letters = jev.respond(
        *(lambda r: (r, *jev.score(engine, r)))(parse_systemone({**JEV_BODY, "x_readout": None})), engine.info
    )
    assert letters["answers"]["damaged"]["x_readout"] == "letter-slots"


@pytest.mark.parametrize(
    "extra, loc",
    [({"x_order": "rotations"}, ["body", "x_order"]), ({"x_normalize": "softmax"}, ["body", "x_normalize"])],
)
def test_system_one_refuses_bad_combinations_naming_the_field(extra, loc):
    from decision_adapter.apis.systemone_requests import JevValidationError, parse_systemone

    with pytest.raises(JevValidationError) as caught:
        parse_systemone({**JEV_BODY, **extra})
    assert [e["loc"] for e in caught.value.errors] == [loc]


def test_the_openai_decisions_api_follows_the_server_default(engine, monkeypatch):
    from decision_adapter.apis import decisions

    monkeypatch.setattr(engine, "settings", dataclasses.replace(engine.settings, readout="cloze"))
    request = decisions.parse_decisions(
        {
            "input": STATE,
            "questions": [
                {"type": "predicate", "name": "refund", "instructions": "The customer asks for a refund."},
                {
                    "type": "choice",
                    "name": "team",
                    "instructions": "Which team?",
                    "choices": [{"value": "billing", "description": "Payments, refunds"}, {"value": "shipping_desk"}],
                },
                {
                    "type": "score",
                    "name": "anger",
                    "instructions": "How frustrated?",
                    "levels": [{"label": "calm"}, {"label": "annoyed"}, {"label": "furious"}],
                },
            ],
        }
    )
    batch = decisions.batch_of(request)
    assert [[cloze_text(o) for o in q.options] for q in batch.questions] == [
        ["yes", "no"],
        ["Payments, refunds", "shipping desk"],
        ["calm", "annoyed", "furious"],
    ]
    results, timing = decisions.score(engine, request)
    assert {r.readout for r in results} == {"cloze"}
    body = decisions.respond(request, results, timing, engine.info)
    assert math.isclose(sum(p["probability"] for p in body["answers"][2]["probabilities"]), 1.0, abs_tol=1e-9)
    assert body["usage"]["input_tokens"] >= timing["input_tokens"] > 0


def test_the_samples_format_follows_the_server_default(engine, monkeypatch):
    from decision_adapter.apis import sample

    monkeypatch.setattr(engine, "settings", dataclasses.replace(engine.settings, readout="cloze"))
    batch = sample.parse_sample(
        {
            "decisions": [
                {
                    "id": "d1",
                    "state": STATE,
                    "question": "Which team?",
                    "options": [{"id": "refunds"}, {"id": "shipping_desk"}],
                }
            ]
        }
    )
    results, _ = sample.decide(engine, batch)
    assert results[0].readout == "cloze"


def test_a_calibration_fitted_for_letters_is_not_applied_to_cloze():
    from decision_adapter.served_calibration import in_force
    from decision_contract.calibration import Calibration

    letters = Calibration("c.json", "0" * 64, "decision-prompt/1", "as_given", {"choice/2": 2.0}, ("choice/2",))
    assert in_force(letters, "choice", 2, "as_given", None)[0] == 2.0
    assert in_force(letters, "choice", 2, "as_given", None, "cloze")[1]["source"] == "none"
    cloze = Calibration(
        "c.json", "0" * 64, "decision-prompt/1", "as_given", {"choice/2": 3.0}, ("choice/2",), readout="cloze"
    )
    assert in_force(cloze, "choice", 2, "as_given", None, "cloze")[0] == 3.0
    assert in_force(cloze, "choice", 2, "as_given", None, "letters")[0] == 1.0


def test_the_routes_accept_the_readout_and_refuse_bad_combinations(engine, monkeypatch):
    """Through the app's routes (Flask's test client) on the in-process engine: own schema and System One."""
    from decision_adapter import app as app_module

    def load(holder):
        holder.serve(engine)  # on its own context

    monkeypatch.setattr(app_module._Holder, "load", load)
    settings = dataclasses.replace(engine.settings, request_timeout_s=600.0)
    client = app_module.create_app(settings, load="now").test_client()
    body = {"id": "d1", "state": STATE, **{k: v for k, v in QUESTIONS[1].items() if k != "id"}, "readout": "cloze"}
    reply = client.post("/invocations", json=body)
    assert reply.status_code == 200, reply.get_json()
    result = reply.get_json()["result"]
    assert result["readout_name"] == "cloze" and result["model"]["readout"] == "letters"
    for extra, field in (({"order": "rotations"}, "order"), ({"normalize": "softmax"}, "normalize")):
        reply = client.post("/invocations", json={**body, **extra})
        assert reply.status_code == 400 and reply.get_json()["error"]["field"] == field
    reply = client.post("/v1/systemone", json={**JEV_BODY, "x_order": "prior"})
    assert reply.status_code == 422 and reply.get_json()["detail"][0]["loc"] == ["body", "x_order"]
