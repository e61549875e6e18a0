"""The readouts are one registry that scoring, the engine and the APIs ask (readout.py, readouts.py).

A stand-in readout, declared here and registered through ``readout.register`` alone (its presentations, the
priors it needs, its reading, its finishing step and its answer extras), is served by the real engine and
app: the own API takes it by name, answers in its words and extras, and the metric line names it; once it
is unregistered the same request is refused. Neither scoring nor any API names it.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from decision_adapter import readout, scoring
from decision_adapter.apis import own
from decision_adapter.caller_errors import InvalidValue
from decision_adapter.priors import Priors
from decision_adapter.prompt import TemplateError
from decision_adapter.questions import DecisionBatch, Option, Question, RenderedPrompt, ScoringItem
from decision_adapter.readout import Finished
from decision_adapter.readouts import READOUT_METHODS, READOUTS
from decision_adapter.scores import Reading, Scored, SlotLogits, logsumexp
from decision_adapter.settings import load_settings
from decision_contract.names import AS_GIVEN

STATE = "Order 4411: the parcel arrived with a cracked screen. The customer wants the money back."
OPTIONS = [{"id": "refund", "text": "Refund"}, {"id": "repair", "text": "Repair"}, {"id": "ignore", "text": "Ignore"}]
METHOD = "first-token"


class FirstToken:
    """The options are not shown; each is scored by the logit of its text's first token after the cloze prompt."""

    name = "first_token"
    moves_options = False
    methods = {METHOD: "Each option's first token's logit at the end of a prompt that lists no options."}

    def __init__(self) -> None:
        self.priors_asked = 0

    def presentations(self, mode, n, max_rotations):
        return AS_GIVEN, [tuple(range(n))]

    def item(self, labels, family, batch, question, shown):
        try:
            prompt = labels.template.render_cloze(batch.state, question.question)
        except TemplateError as exc:
            raise InvalidValue(str(exc), None) from None
        firsts = tuple(labels.continuation_tokens(question.options[i].text)[:1] for i in shown)
        return ScoringItem(prompt, len(question.options), question.loc, batch.state_field, self.name, firsts)

    def read(self, labels, logits, item, logits_after, log_probs_after):
        values = logits[[c[0] for c in item.continuations]].astype(np.float64)
        return Scored(SlotLogits(values), METHOD, float(np.exp(logsumexp(values) - logsumexp(logits))), 1, 0)

    def measure_priors(self, evaluator, labels, priors, questions, family):
        self.priors_asked += len(questions)
        return {}, 0

    def finish(self, planned, readings, priors):
        return Finished(readings[0].scores, extras={"first_tokens": list(readings[0].option_tokens)})


@pytest.fixture
def first_token():
    stand_in = readout.register(FirstToken())
    try:
        yield stand_in
    finally:
        readout.unregister(stand_in.name)


def ask(options, readout_name="first_token") -> DecisionBatch:
    question = Question(
        "q", "What does the customer want?", tuple(Option(o["id"], o["text"]) for o in options), readout=readout_name
    )
    return DecisionBatch("d", STATE, (question,), single=True)


class Template:
    def render_cloze(self, state, question):
        return RenderedPrompt(f"{state}\n{question}\n", None, None)


class Labels:
    """The Labels seam with no model behind it: an option's first token is its text's length."""

    template = Template()
    slot_tokens, code_tokens, max_options = (), None, 0

    def continuation_tokens(self, text, loc=()):
        return (len(text), 0)

    def label_tokens(self, n):
        return ()

    def token_text(self, token):
        return f"<{token}>"


class Scorer:
    """The Scorer seam with no engine behind it: the logits at every prompt's end are 0, 1, 2, ..."""

    def __init__(self, settings):
        self.model, self.settings, self.calibration = Labels(), settings, None
        self.priors = Priors(4)
        self.items = []

    def score_items(self, items):
        self.items.extend(items)
        logits = np.arange(64, dtype=np.float32)
        readings = [
            Reading(
                **vars(READOUTS[item.readout].read(self.model, logits, item, None, None)),
                input_tokens=7,
                top_token=63,
                option_tokens=tuple(len(c) for c in item.continuations),
            )
            for item in items
        ]
        return readings, {"input_tokens": 7 * len(items)}


def test_scoring_needs_only_the_seams(first_token):
    """No engine: scoring plans, evaluates and answers through whatever satisfies ``Scorer``."""
    scorer = Scorer(load_settings({}))
    options = [{"id": "a", "text": "Ab"}, {"id": "b", "text": "Abcd"}, {"id": "c", "text": "Abc"}]
    (answer,), timing = scoring.decide(scorer, ask(options))
    assert [item.readout for item in scorer.items] == ["first_token"] and timing["input_tokens"] == 7
    want = np.exp([2.0, 4.0, 3.0]) / np.exp([2.0, 4.0, 3.0]).sum()  # the logits of tokens 2, 4 and 3
    assert np.allclose(answer.probabilities, want, rtol=0, atol=1e-12) and answer.option_logits == (2.0, 4.0, 3.0)
    assert answer.top_token_text == "<63>" and answer.extras == {"first_tokens": [1, 1, 1]}


def test_a_registered_readout_is_planned_read_and_finished_by_its_own_steps(engine, first_token):
    assert list(READOUTS)[:2] == ["letters", "cloze"] and "first_token" in READOUTS and METHOD in READOUT_METHODS
    (answer,), timing = scoring.decide(engine, ask(OPTIONS))
    assert answer.readout == "first_token" and answer.method == METHOD and answer.order == AS_GIVEN
    assert first_token.priors_asked == 1 and timing["prior_tokens"] == 0
    assert answer.extras == {"first_tokens": [1, 1, 1]} and answer.forward_passes == 1
    p = np.array(answer.probabilities)
    assert math_close(p.sum(), 1.0) and np.allclose(
        p, np.exp(answer.option_logits) / np.exp(answer.option_logits).sum()
    )
    # the prompt lists no options: the same prompt for every order, the answer reordered with the options
    (reversed_,), _ = scoring.decide(engine, ask(OPTIONS[::-1]))
    assert reversed_.prompt_sha256 == answer.prompt_sha256
    assert np.allclose(reversed_.probabilities[::-1], answer.probabilities, rtol=0, atol=1e-6)


def math_close(a: float, b: float) -> bool:
    return abs(a - b) < 1e-9


def test_the_own_api_serves_it_by_name_and_the_metric_line_names_it(engine, first_token, monkeypatch, capsys):
    from decision_adapter import app as app_module

    monkeypatch.setattr(app_module._Holder, "load", lambda holder: holder.serve(engine))
    # a generous time limit: these cores are shared, and the limit is not what is tested here
    client = app_module.create_app(
        dataclasses.replace(engine.settings, request_timeout_s=600.0), load="now"
    ).test_client()
    body = {
        "id": "d1",
        "state": STATE,
        "question": "What does the customer want?",
        "options": OPTIONS,
        "readout": "first_token",
    }
    reply = client.post("/invocations", json=body)
    assert reply.status_code == 200, reply.get_json()
    result = reply.get_json()["result"]
    assert result["readout_name"] == "first_token" and result["first_tokens"] == [1, 1, 1]
    assert result["readout"] == FirstToken.methods[METHOD] and result["option_ids"] == ["refund", "repair", "ignore"]
    refused = client.post("/invocations", json={**body, "order": "rotations"})
    assert (
        refused.status_code == 400
        and "does not apply to the first_token readout" in refused.get_json()["error"]["message"]
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if '"_aws"' in line]
    assert lines[0]["readout"] == "first_token" and lines[0]["Options"] == 3


def test_an_unregistered_readout_is_refused_naming_the_field(engine):
    with pytest.raises(InvalidValue) as refused:
        scoring.decide(engine, ask(OPTIONS))
    assert refused.value.status == 400 and "'first_token' is not a readout; use one of letters, cloze" in str(
        refused.value.message
    )
    assert "first_token" not in READOUTS and METHOD not in READOUT_METHODS
    own.parse_decision({"id": "d", "state": STATE, "question": "Which?", "options": OPTIONS, "readout": "cloze"})
