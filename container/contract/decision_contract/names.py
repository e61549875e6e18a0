"""Names both rooms use on the wire and in files (the wire's own rules: ``wire``)."""

from __future__ import annotations

# How option positions are kept out of an answer (a request's ``order``, DECISION_ADAPTER_ORDER, and the
# order mode a calibration file was fitted in).
AS_GIVEN, PRIOR, ROTATIONS = ORDER_MODES = ("as_given", "prior", "rotations")

# How an answer is read from the model: ``letters``, the logits of the options' answer labels after a
# prompt that lists them (the published method); ``cloze``, each option's own text scored as the
# continuation of a prompt that lists none.
LETTERS, CLOZE = "letters", "cloze"
READOUTS = (LETTERS, CLOZE)
# How a cloze option's token log-probabilities become its score: their sum, their mean per token, or the
# sum minus the same text's after a content-free prompt (pointwise mutual information, the default).
PMI, SUM, MEAN = NORMALIZATIONS = ("pmi", "sum", "mean")

# The question types a calibration profile is fitted for (System One's names; the OpenAI Decisions API's
# predicate is a noul).
QUESTION_TYPES = ("choice", "noul", "score")

# The chat-completions body's field that asks a decision instead of a generated answer (the openai library
# sends it as extra_body), and the answer's field that carries the decision's result.
CHAT_DECISION = "decision"
