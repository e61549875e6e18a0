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

``PrefixReuse`` is a base class of ``Engine``, the one place that moves the engine's
context: its position (llama-cpp-python's ``input_ids`` and ``n_tokens``), clearing it, and
saving and loading its sequence. What the context holds is kept in the engine's
``_prefix``, ``_heads`` and ``_first_logits``; evaluating (``_eval``, under the time limit)
and reading the logits (``_last_logits``) are the engine's.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from .questions import RenderedPrompt
from .slots import EngineError
from .state_cache import CachedState
from .tokens import MAX_HEADS, PromptTokenizer, common_prefix_len


@dataclass
class Prefix:
    """The tokens the context holds from cell 0 on. Whatever evaluates over those cells forgets it (sets the
    engine's ``_prefix`` to None): a partial snapshot is only valid on top of those very cells."""

    tokens: tuple[int, ...]
    state: bytearray | None  # restore mode: the recurrent part of the sequence after the prefix (_save_sequence)


def shared_prefix(first: RenderedPrompt, token_lists: list[list[int]], tokenizer: PromptTokenizer,
                  prompt_tokens) -> tuple[int, ...]:
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


class PrefixReuse:
    """Bringing the engine's context to a request's shared prefix, and back to it before each prompt."""

    # Provided by Engine: llm, _llama_cpp, settings, prefix_mode, state_cache, _prefix, _heads, _first_logits,
    # _eval, _last_logits, prompt_tokens, start_afresh (_reset_context and the cached prefix forgotten).

    def _enter_prefix(self, first: RenderedPrompt, prefix: tuple[int, ...], tokens: list[int]) -> bool:
        """Bring the context to the end of the shared prefix, evaluating only what is not cached.

        With ``trim`` the first prompt (``tokens``) is evaluated whole from where it departs from the
        cache, in as few llama_decode calls as the batch size allows; the others are cut back to the
        prefix. ``restore`` evaluates up to the prefix and saves the sequence there first, as a recurrent
        memory cannot be cut back to it afterwards. Unless cross-request reuse is on, nothing past the
        fixed head is taken from an earlier request: ``trim`` cuts the cache back to the head at most,
        ``restore`` starts from the head's saved sequence. Returns whether the whole prefix came from
        an earlier request (for the log only).
        """
        across = self.settings.cross_request_reuse
        if self.prefix_mode == "trim" and prefix:
            cached = self.llm.input_ids[: self.llm.n_tokens]
            # At least two new tokens: llama.cpp's CPU kernels take another path for a one-token batch, and a
            # prompt's last token read alone can differ slightly from the same token read with others.
            common = max(0, min(common_prefix_len(cached, tokens), len(tokens) - 2))
            if not across:
                head = self._head(first, prefix)
                common = min(common, len(head.tokens) if head is not None else 0)
            self._prefix = None
            if self.state_cache is not None:
                hit = self.state_cache.longest(tokens, more_than=common)
                if hit is not None:  # a recent request shares more than the context holds: start from there
                    entry, shared = hit
                    self._reset_context()
                    self._load_sequence(entry.state)
                    if entry.logits is not None and shared == len(entry.tokens) == len(tokens):
                        self._set_position(len(tokens), tokens)  # this very prompt: read its kept logits
                        self._first_logits = (entry.tokens, entry.logits)
                        self._prefix = Prefix(prefix, None)
                        return True
                    common = min(shared, len(tokens) - 2)
                    self._set_position(common, tokens[:common])
            self._set_position(common)  # eval() removes the KV cells past it
            self._eval(tokens[common:])
            self._prefix = Prefix(prefix, None)
            if self.state_cache is not None and self.state_cache.get(tokens) is None:
                self.state_cache.put(CachedState(tuple(tokens), self._save_sequence(), logits=self._last_logits()))
            return common >= len(prefix)
        if across and self._prefix is not None and self._prefix.tokens == prefix and prefix:
            return True
        cached = self.state_cache.get(prefix) if self.state_cache is not None and prefix else None
        if cached is not None:
            self.start_afresh()
            self._load_sequence(cached.state)
            self._set_position(len(prefix), prefix)
            self._prefix = Prefix(prefix, cached.partial)
            return True
        head = self._head(first, prefix) if self.prefix_mode == "restore" and prefix else None
        self.start_afresh()
        start = 0
        if head is not None:
            self._load_sequence(head.state)
            self._set_position(len(head.tokens), head.tokens)
            start = len(head.tokens)
        if start < len(prefix):
            self._eval(list(prefix[start:]))
        state = self._save_sequence(partial=True) if self.prefix_mode == "restore" and prefix else None
        self._prefix = Prefix(prefix, state)
        if self.state_cache is not None and prefix:
            self.state_cache.put(CachedState(prefix, self._save_sequence(), state))
        return False

    def _head(self, prompt: RenderedPrompt, prefix: tuple[int, ...]) -> Prefix | None:
        """The prompt's fixed head, if its tokens begin this request's prefix: its tokens, and with
        ``restore`` the sequence saved after them (evaluated and saved on first use)."""
        if prompt.state_start is None:
            return None
        text = prompt.text[: prompt.state_start]  # the system prompt and template only: no caller text
        head = self._heads.get(text)
        if head is None:
            # One token of margin, as at the state's end: the head's last token may merge with the state.
            tokens = tuple(self.prompt_tokens(prompt, prompt.state_start)[:-1])
            if not tokens or prefix[: len(tokens)] != tokens:
                return None
            state = None
            if self.prefix_mode == "restore":
                self.start_afresh()
                self._eval(list(tokens))
                state = self._save_sequence()
            head = Prefix(tokens, state)
            if len(self._heads) >= MAX_HEADS:
                self._heads.pop(next(iter(self._heads)))
            self._heads[text] = head
        return head if prefix[: len(head.tokens)] == head.tokens else None

    def _rewind(self, tokens, saved: bytearray | None) -> None:
        """Return to the state right after ``tokens``: cut the KV cache back, or load the recurrent part saved
        there (a partial snapshot) and cut the attention cells past ``tokens``."""
        if self._holds(tokens):
            return  # nothing evaluated past them yet
        if not tokens:
            self._reset_context()
        elif saved is None:
            self._set_position(len(tokens))  # eval() removes the KV cells past it
        else:
            self._load_sequence(saved, partial=True)
            self._set_position(len(tokens), tokens)  # eval() removes the attention cells past it

    def _holds(self, tokens) -> bool:
        """Whether the context holds exactly ``tokens``. The same length is not enough: with ``restore`` a
        cached state may be followed by another question of the same length."""
        n = self.llm.n_tokens
        return n == len(tokens) and (n == 0 or bool(np.array_equal(self.llm.input_ids[:n], tokens)))

    def _set_position(self, n: int, tokens=None) -> None:
        # Llama.eval() continues from n_tokens and records what it evaluated in input_ids; it has no public
        # way to move back but reset() (to 0), so the engine sets them (and only here and in _reset_context).
        if tokens is not None:
            self.llm.input_ids[:n] = tokens
        self.llm.n_tokens = n

    def _reset_context(self) -> None:
        self.llm.reset()
        self._short_cells = False
        memory = self._llama_cpp.llama_get_memory(self.llm.ctx)
        if memory is not None:
            # Forget every cell but leave the buffers' bytes: llama.cpp zeroed them once at start-up, empty
            # cells are masked out of attention and a recurrent state starts from zeros when its sequence
            # starts, so zeroing again changes no answer; it would write the whole KV buffer for each
            # restored question.
            self._llama_cpp.llama_memory_clear(memory, False)

    def _save_sequence(self, *, partial: bool = False) -> bytearray:
        """Sequence 0's state: whole, or (``partial``) only the part that cannot be cut back, the recurrent
        states of a hybrid or recurrent memory (llama.cpp writes a plain KV cache whole either way)."""
        llama_cpp, ctx = self._llama_cpp, self.llm.ctx
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY if partial else 0
        size = llama_cpp.llama_state_seq_get_size_ext(ctx, 0, flags)
        state = bytearray(size)  # llama.cpp writes straight into it: no second copy of a state of megabytes
        written = llama_cpp.llama_state_seq_get_data_ext(ctx, (ctypes.c_uint8 * size).from_buffer(state), size, 0,
                                                         flags)
        if written == 0:
            raise EngineError("llama.cpp could not save the sequence state for prefix reuse")
        del state[written:]
        return state

    def _load_sequence(self, state: bytearray, *, partial: bool = False) -> None:
        """Replace sequence 0's state (``partial``: its recurrent part) with a saved one."""
        llama_cpp = self._llama_cpp
        self._short_cells = True  # how its cells were evaluated is not known here (splits.py)
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY if partial else 0
        # llama.cpp only reads it: point at the saved bytes themselves instead of copying them per question.
        data = (ctypes.c_uint8 * len(state)).from_buffer(state)
        if llama_cpp.llama_state_seq_set_data_ext(self.llm.ctx, data, len(state), 0, flags) == 0:
            raise EngineError("llama.cpp could not restore the sequence state for prefix reuse")
