"""Prefix reuse: evaluate what prompts share once, and only what follows it per prompt.

Every question about a state shares the prompt up to the end of that state, and every
prompt shares the fixed head before the state (system prompt, the opening of the user
turn). The engine evaluates the state's prefix once and then each question from it.
Across requests it keeps only the fixed head, which holds nothing a caller wrote: a
caller's state is reused inside its own request only, so what a request costs does not
depend on what the previous caller sent (reusing it would let the next caller time a
guess of it). ``DECISION_ADAPTER_CROSS_REQUEST_REUSE=on`` (single-tenant endpoints)
reuses the previous request's tokens too, as far as they match; with
``DECISION_ADAPTER_STATE_CACHE_MIB`` also those of recent requests before it
(state_cache.py: their saved sequences, LRU, bounded in MiB): ``trim`` loads the cached
sequence that shares the longest prefix with the request's first prompt, ``restore`` the
one saved after exactly the request's state. How the head is kept:

* ``trim`` (attention-only models): keep the KV cache up to the longest common prefix
  with what is cached, but no further than the head (with the opt-in: no limit), cut the
  rest, evaluate only what follows;
* ``restore``: hybrid and recurrent models need this, because llama.cpp cannot cut the
  tail of a recurrent memory. The sequence is saved right after the fixed head (once per
  head, the decision head at start-up by ``Engine.prove``) and loaded back for each
  request; the request's state prefix is then evaluated and its recurrent part saved too.
  Before each of its questions that part is loaded back and the attention cells past the
  state are cut (they can be): the state's own attention cells stay where they are, so a
  snapshot holds the recurrent states only, of one size whatever the state's length.

``auto`` picks ``restore`` for hybrid/recurrent models and ``trim`` otherwise. With
``trim`` the first prompt of a request is evaluated whole from where it departs from the
cache (one llama_decode call per batch-size of tokens), so ``prefix_eval_ms`` includes it.
How a prompt is split into calls does not change its answer beyond rounding, except that a
lone token in a batch takes another path in llama.cpp: ``trim`` never evaluates a prompt's
last token alone (the two-level readout reads its appended letter alone in every mode alike).

Here: what a request's prompts share (``shared_prefix``) and what a context holds of it (``Prefix``).
Bringing a context to it and back is llama_context.py's (``Context.enter_prefix``, ``Context.rewind``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .questions import RenderedPrompt
from .tokens import PromptTokenizer, common_prefix_len

PrefixTokens = Callable[[RenderedPrompt, int | None], list[int]]  # the model's prompt_tokens: the text up to an end


@dataclass
class Prefix:
    """The tokens the context holds from cell 0 on. Whatever evaluates over those cells forgets it (sets the
    context's ``prefix`` to None): a partial snapshot is only valid on top of those very cells."""

    tokens: tuple[int, ...]
    state: bytearray | None  # restore mode: the recurrent part of the sequence after the prefix (Context.save_sequence)


def shared_prefix(
    first: RenderedPrompt, token_lists: list[list[int]], tokenizer: PromptTokenizer, prompt_tokens: PrefixTokens
) -> tuple[int, ...]:
    """The tokens every prompt of the list shares: up to the end of the first prompt's state for a lone
    prompt, and for several as far as they all agree (the fixed text after the state, a common question
    stem), leaving each at least two tokens of its own. ``token_lists[0]`` are ``first``'s tokens."""
    if first.state_end is None:
        return ()
    own = token_lists[0]
    if len(token_lists) > 1:
        # One request's own prompts: how far they agree says nothing about any other caller. Two tokens kept
        # back, as a prompt's last token read alone can differ from the same token read with others.
        length = min(common_prefix_len(own, tokens) for tokens in token_lists[1:])
        return tuple(own[: max(0, min([length] + [len(t) - 2 for t in token_lists]))])
    ends = np.cumsum(tokenizer.piece_bytes[own])
    if own and own[0] == tokenizer.bos_id and not first.text.startswith(tokenizer.bos_text):
        ends -= ends[0]  # the BOS the engine added spells nothing of the text
    if len(own) and ends[-1] == len(first.text.encode("utf-8")):
        # The tokens spell the text byte for byte: the cut is at the last one that ends within the state
        # (the same in every prompt about it, as the same fixed text follows the state in all).
        length = int(np.searchsorted(ends, len(first.text[: first.state_end].encode("utf-8")), side="right"))
    else:
        # One token of margin: the last token of the state's own tokens may merge with what follows.
        length = max(0, len(prompt_tokens(first, first.state_end)) - 1)
    for tokens in token_lists[1:]:
        length = min(length, common_prefix_len(own, tokens))
    return tuple(own[: min(length, len(own) - 1)])
