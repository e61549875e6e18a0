"""The answer labels' tokens: found once at start-up, checked again where a prompt needs it.

A readout reads the logits of the labels' tokens at the prompt's end, so each label
must be exactly the tokens that appending it adds: a letter one token, a code (group
letter + digit) two, none of them merging with the prompt's last token. The check
runs on probe prompts at start-up; the template's fixed tail (end of the user turn
plus the generation prompt) is recorded, so a request whose tokens end with that
same tail needs no check of its own, and one whose text merged with the tail is
checked on its last characters only.

The functions take the model's ``prompt_tokens`` and ``detokenize``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from .prompt import DIGITS, GROUP_LETTERS, LETTERS, ChatTemplate
from .questions import Option, Question, RenderedPrompt
from .seams import CodeTokens, EngineError
from .tokens import common_prefix_len

log = logging.getLogger(__name__)

PromptTokens = Callable[[RenderedPrompt], list[int]]  # the model's prompt_tokens
Detokenize = Callable[[list[int]], bytes]  # the model's detokenize


# Used at start-up to find the slot tokens and the template's fixed tail, and by the start-up proof.
PROBE_STATE = "probe state"
PROBE_QUESTIONS = (
    Question("probe-1", "Which option fits?", tuple(Option(letter, f"option {letter}") for letter in LETTERS)),
    Question(
        "probe-2", "Pick one, please.", tuple(Option(letter, f"choice number {i}") for i, letter in enumerate(LETTERS))
    ),
)

TAIL_CHECK_CHARS = 256  # an answer label can only merge with what comes just before it


def find_slots(
    template: ChatTemplate, prompt_tokens: PromptTokens, detokenize: Detokenize
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The letters' tokens, each one distinct token appended without re-tokenizing, and the template's
    fixed tail (the tokens every probe prompt ends with)."""
    probes = []
    for question in PROBE_QUESTIONS:
        rendered = template.render_decision(PROBE_STATE, question)
        probes.append(prompt_tokens(rendered))
    first = template.render_decision(PROBE_STATE, PROBE_QUESTIONS[0])
    if first.content_span is None:
        log.warning(
            "the chat template does not copy the user turn verbatim; control-token text in "
            "requests cannot be told apart from the template's own"
        )
    slots = check_letters(first, probes[0], prompt_tokens, detokenize)
    tail_len = common_prefix_len(probes[0][::-1], probes[1][::-1])
    if tail_len == 0:
        raise EngineError("the chat template leaves no fixed tail after the user turn")
    return slots, tuple(probes[0][-tail_len:])


def find_codes(
    template: ChatTemplate, prompt_tokens: PromptTokens, detokenize: Detokenize
) -> tuple[CodeTokens | None, str | None]:
    """Group-letter and digit tokens for the two-level readout, or (None, why not)."""
    prompt = template.render_decision(PROBE_STATE, PROBE_QUESTIONS[0])
    try:
        return check_codes(prompt, prompt_tokens(prompt), len(GROUP_LETTERS), prompt_tokens, detokenize), None
    except EngineError as exc:
        log.warning("more than %d options are not available with this model: %s", len(LETTERS), exc)
        return None, str(exc)


def check_letters(
    prompt: RenderedPrompt, tokens: list[int], prompt_tokens: PromptTokens, detokenize: Detokenize
) -> tuple[int, ...]:
    """Each letter's one token after ``prompt`` (whose tokens are ``tokens``), all distinct."""
    slots = tuple(_appended_token(prompt, tokens, letter, prompt_tokens, detokenize) for letter in LETTERS)
    if len(set(slots)) != len(slots):
        raise EngineError("two answer letters map to the same token")
    return slots


def check_codes(
    prompt: RenderedPrompt, tokens: list[int], n_groups: int, prompt_tokens: PromptTokens, detokenize: Detokenize
) -> CodeTokens:
    """Each code (group letter + digit) must be exactly those two tokens appended to the prompt."""
    groups: list[int] = []
    digits: tuple[int, ...] | None = None
    for letter in GROUP_LETTERS[:n_groups]:
        group = _appended_token(prompt, tokens, letter, prompt_tokens, detokenize)
        row = tuple(
            _appended_token(prompt, tokens + [group], digit, prompt_tokens, detokenize, after=letter)
            for digit in DIGITS
        )
        if digits is None:
            digits = row
        elif row != digits:
            raise EngineError(f"the digits after {letter!r} are tokenized differently from those after 'A'")
        groups.append(group)
    if digits is None:
        raise EngineError("no group letters to check")
    if len(set(groups)) != len(groups) or len(set(digits)) != len(digits):
        raise EngineError("two group letters or two digits map to the same token")
    return tuple(groups), digits


def label_tokens(slot_tokens: tuple[int, ...], code_tokens: CodeTokens | None, n_options: int) -> tuple[int, ...]:
    """The token ids a letters readout of an n-option question reads: the first n answer letters, or the
    group letters in use and the digits (``code_tokens``: the groups' and the digits' tokens; none where the
    model has no codes)."""
    if n_options <= len(slot_tokens):
        return tuple(slot_tokens[:n_options])
    if code_tokens is None:
        return ()
    groups, digits = code_tokens
    return tuple(groups[: -(-n_options // len(DIGITS))]) + tuple(digits)


def tail_of(prompt: RenderedPrompt, chars: int = TAIL_CHECK_CHARS) -> RenderedPrompt:
    """The prompt's last ``chars`` characters, with the caller's span moved along (for slot checks)."""
    cut = max(0, len(prompt.text) - chars)
    span = prompt.content_span
    if span is not None:
        span = (max(0, span[0] - cut), max(0, span[1] - cut))
    return RenderedPrompt(prompt.text[cut:], None, span)


def _appended_token(
    prompt: RenderedPrompt,
    tokens: list[int],
    piece: str,
    prompt_tokens: PromptTokens,
    detokenize: Detokenize,
    after: str = "",
) -> int:
    """The one token ``piece`` adds after ``prompt.text + after`` (whose tokens are ``tokens``): appending
    it must leave those tokens as they are and add exactly one that decodes back to ``piece``."""
    extended = prompt_tokens(RenderedPrompt(prompt.text + after + piece, prompt.state_end, prompt.content_span))
    if extended[:-1] != tokens or len(extended) != len(tokens) + 1:
        raise EngineError(
            f"appending {after + piece!r} to the prompt re-tokenizes it or takes more than one "
            "token per character; this model's tokenizer cannot use these answer labels"
        )
    token = extended[-1]
    if detokenize([token]).decode("utf-8", errors="replace") != piece:
        raise EngineError(f"the token for {piece!r} does not decode back to {piece!r}")
    return token
