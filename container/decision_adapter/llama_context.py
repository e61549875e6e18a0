"""One llama.cpp context on the loaded model: evaluating tokens, rewinding, the prefix it holds, its time limit.

Every lane (scheduler.py) has one; the engine composes it with the model. A context is the one place that
moves what llama.cpp holds: its position (llama-cpp-python's ``input_ids`` and ``n_tokens``), clearing it,
saving and loading its sequence, and evaluating in calls cut as splits.py says, so that the cut never
changes a logit.

Prefix reuse (prefix_cache.py says what is shared and why): ``enter_prefix`` brings the context to a
request's shared prefix evaluating only what is not cached, ``rewind`` back to it before each prompt.
Across requests only the fixed head is kept (``trim`` keeps its cells; ``restore`` loads the sequence saved
after it), unless ``DECISION_ADAPTER_CROSS_REQUEST_REUSE=on``; the opt-in state cache (state_cache.py) is
shared by the model's contexts.

Time limit: ``with context.time_limit(seconds):`` stops llama.cpp mid-graph once the limit passes
(deadline.py), forgets the held prefix and clears the context, so the next request starts as on a fresh
server. A context is not thread-safe: one request at a time uses it.
"""

from __future__ import annotations

import ctypes
import functools
import itertools
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import numpy as np

from . import runtime, splits
from .caller_errors import TimedOut
from .deadline import Deadline
from .prefix_cache import Prefix, PrefixTokens
from .questions import RenderedPrompt
from .seams import EngineError, R, ThreadSource
from .settings import Settings
from .state_cache import CachedState, StateCache
from .tokens import MAX_HEADS, common_prefix_len


class Context:
    """A ``Llama`` context: what it holds (``prefix``), how its prompts are cut into calls, its threads."""

    def __init__(
        self,
        llama_cpp: Any,
        llm: Any,
        settings: Settings,
        *,
        recurrent: bool,
        flash_attention: str,
        threads: tuple[int, int],
        state_cache: StateCache | None,
    ):
        self.llama_cpp = llama_cpp
        self.llm = llm
        self.settings = settings
        self.n_vocab = llm.n_vocab()
        self.recurrent = recurrent
        self.flash_attention = flash_attention
        self.state_cache = state_cache
        mode = settings.prefix_reuse
        if mode == "auto":
            mode = "restore" if recurrent else "trim"
        if mode == "trim" and recurrent:
            raise EngineError(
                "DECISION_ADAPTER_PREFIX_REUSE=trim cannot work on a hybrid or recurrent model; use auto or restore"
            )
        self.prefix_mode = mode
        # Whether an evaluation may cut the held cells back to evaluate the last ones again (splits.py): not in a
        # recurrent memory, nor in restore mode, which keeps its own saved states.
        self.cuts_back = not recurrent and mode != "restore"
        self.deadline = Deadline()
        self.deadline.install(llama_cpp, llm.ctx)
        self.prefix: Prefix | None = None  # what the context holds from cell 0 on
        # The head's text -> its tokens, and in restore mode the sequence saved after them.
        self._heads: dict[str, Prefix] = {}
        # (tokens, logits) of a prompt the state cache answered whole; read only for exactly those tokens.
        self.first_logits: tuple[tuple[int, ...], np.ndarray] | None = None
        self._short_cells = False  # the cells held may come from a call of fewer than least_tokens (splits.py)
        self.tokens_evaluated = 0  # every token given to llama.cpp for decisions, for the benchmarks
        self.decode_calls = 0  # and the llama_decode calls they took
        self._threads = threads
        self.thread_source: ThreadSource | None = None  # scheduler.py: where each call takes its threads

    def another(self, threads: tuple[int, int]) -> Context:
        """A new context on the same loaded model, with this one's settled flash attention and prefix reuse and
        nothing held."""
        llama_cpp = self.llama_cpp
        with (
            runtime.context_params(
                llama_cpp, flash_attn_type=runtime.FLASH_ATTN_TYPES["off" if self.flash_attention == "off" else "on"]
            ),
            runtime.llama_log(llama_cpp),
        ):
            llm = runtime.another_context(self.llm)
        other = Context(
            llama_cpp,
            llm,
            self.settings,
            recurrent=self.recurrent,
            flash_attention=self.flash_attention,
            threads=threads,
            state_cache=self.state_cache,
        )
        other.prefix_mode, other.cuts_back = self.prefix_mode, self.cuts_back
        return other

    @property
    def least_tokens(self) -> int:
        """The fewest tokens one llama_decode call of a prompt may hold (splits.py); "auto" with no verdict from
        llama.cpp counts as on."""
        return splits.PLAIN_LEAST if self.flash_attention == "off" else splits.FLASH_ATTENTION_LEAST

    def set_threads(self, threads: tuple[int, int]) -> None:
        """The CPU threads (generation, prompt evaluation) of this context's next evaluations."""
        if threads != self._threads:
            self.llama_cpp.llama_set_n_threads(self.llm.ctx, *threads)
            self._threads = threads

    def on_share(self, call: Callable[[], R]) -> R:
        """Run one llama.cpp call on this context's share of the server's threads (scheduler.py), waiting while
        none is free; without a source, here on the threads it was given."""
        if self.thread_source is None:
            return call()

        def on(threads: tuple[int, int]) -> R:
            self.set_threads(threads)
            return call()

        return self.thread_source.run(on, self.stop_if_expired)

    def replace(self, **fields: Any) -> None:
        """A new llama.cpp context in place of this one, made with these ``llama_context_params`` fields."""
        runtime.replace_context(self.llm, **fields)
        self.deadline.install(self.llama_cpp, self.llm.ctx)
        self.start_afresh()

    # -- time limit --------------------------------------------------------------

    def time_limit(self, seconds: float | None) -> AbstractContextManager[Deadline]:
        """Context manager: evaluations inside it stop with TimedOut once ``seconds`` have passed."""
        return self.deadline.limit(seconds)

    @contextmanager
    def within_limit(self) -> Iterator[None]:
        """Run llama.cpp work; past the time limit, raise TimedOut (before it, or when it was aborted).

        Whatever else goes wrong inside, the context and the held prefix are dropped too: a half-written
        cache must never be reused by the next request.
        """
        self.stop_if_expired()
        try:
            yield
        except BaseException:  # llama-cpp-python: "llama_decode returned 2" when the callback aborted
            self.stop_if_expired()
            self.start_afresh()
            raise

    def stop_if_expired(self) -> None:
        if not self.deadline.expired:
            return
        # What an aborted evaluation left in the context is not worth keeping: start afresh.
        self.start_afresh()
        raise TimedOut(
            f"the request held the model for more than {self.deadline.seconds:g} s and was stopped "
            "(DECISION_ADAPTER_REQUEST_TIMEOUT); send a shorter state or fewer questions, or raise the limit"
        )

    # -- evaluating ----------------------------------------------------------------

    def eval(self, tokens: Sequence[int], *, appended: bool = False) -> None:
        """Evaluate ``tokens`` after what the context holds, in calls cut as splits.py says. What a readout
        ``appended`` to a whole prompt is evaluated in the same calls in every request, so it needs no floor
        but two tokens, and never evaluates the prompt's cells again (another kernel would rewrite them)."""
        self._decode(tokens, appended, each=False)

    def eval_reading_each(self, tokens: Sequence[int], *, appended: bool = False) -> np.ndarray:
        """As ``eval``, returning the logits at each of the tokens' positions (one float32 row per token).
        ``Llama.eval`` keeps only the last position's logits unless the whole model was loaded with ``logits_all``."""
        rows = self._decode(tokens, appended, each=True)
        assert rows is not None  # each=True reads the rows
        return rows

    def _decode(self, tokens: Sequence[int], appended: bool, *, each: bool) -> np.ndarray | None:
        llm, rows = self.llm, list[np.ndarray]()
        if not len(tokens):
            return np.empty((0, self.n_vocab), np.float32) if each else None
        least = splits.PLAIN_LEAST if appended else self.least_tokens
        back = (
            splits.back_up(llm.n_tokens, len(tokens), least, short=self._short_cells)
            if self.cuts_back and not appended
            else 0
        )
        start = llm.n_tokens - back
        run = [*llm.input_ids[start : llm.n_tokens].tolist(), *tokens]
        points = splits.cuts(len(run), min(llm.n_batch, llm.context_params.n_ubatch), least)
        with self.within_limit():
            self.set_position(start)
            for first, end in itertools.pairwise(points):
                chunk = run[first:end]
                if not each:
                    self.on_share(functools.partial(llm.eval, chunk))
                    continue
                llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)  # as Llama.eval: nothing past the position survives
                llm._batch.set_batch(batch=chunk, n_past=llm.n_tokens, logits_all=True)
                self.on_share(lambda: llm._ctx.decode(llm._batch))
                llm.input_ids[llm.n_tokens : llm.n_tokens + len(chunk)] = chunk
                llm.n_tokens += len(chunk)
                pointer = self.llama_cpp.llama_get_logits(llm.ctx)
                rows.append(np.ctypeslib.as_array(pointer, shape=(len(chunk), self.n_vocab)).copy())
        if not appended:  # a call from a later cell held at least ``least`` tokens (splits.back_up)
            self._short_cells = start == 0 and len(run) < least
        self.tokens_evaluated += len(run)
        self.decode_calls += len(points) - 1
        return np.concatenate(rows)[back:] if each else None

    def last_logits(self) -> np.ndarray:
        """The last position's logits over the vocabulary, float32 as llama.cpp wrote them (a copy: the next
        evaluation overwrites its buffer); readouts take the slots' logits as float64."""
        pointer = self.llama_cpp.llama_get_logits_ith(self.llm.ctx, -1)
        logits: np.ndarray = np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).copy()
        return logits

    # -- the prefix held -------------------------------------------------------------

    def enter_prefix(
        self, first: RenderedPrompt, prefix: tuple[int, ...], tokens: list[int], prompt_tokens: PrefixTokens
    ) -> bool:
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
                head = self._head(first, prefix, prompt_tokens)
                common = min(common, len(head.tokens) if head is not None else 0)
            self.prefix = None
            if self.state_cache is not None:
                hit = self.state_cache.longest(tokens, more_than=common)
                if hit is not None:  # a recent request shares more than the context holds: start from there
                    entry, shared = hit
                    self.reset()
                    self.load_sequence(entry.state)
                    if entry.logits is not None and shared == len(entry.tokens) == len(tokens):
                        self.set_position(len(tokens), tokens)  # this very prompt: read its kept logits
                        self.first_logits = (entry.tokens, entry.logits)
                        self.prefix = Prefix(prefix, None)
                        return True
                    common = min(shared, len(tokens) - 2)
                    self.set_position(common, tokens[:common])
            self.set_position(common)  # eval() removes the KV cells past it
            self.eval(tokens[common:])
            self.prefix = Prefix(prefix, None)
            if self.state_cache is not None and self.state_cache.get(tokens) is None:
                self.state_cache.put(CachedState(tuple(tokens), self.save_sequence(), logits=self.last_logits()))
            return common >= len(prefix)
        if across and self.prefix is not None and self.prefix.tokens == prefix and prefix:
            return True
        cached = self.state_cache.get(prefix) if self.state_cache is not None and prefix else None
        if cached is not None:
            self.start_afresh()
            self.load_sequence(cached.state)
            self.set_position(len(prefix), prefix)
            self.prefix = Prefix(prefix, cached.partial)
            return True
        head = self._head(first, prefix, prompt_tokens) if self.prefix_mode == "restore" and prefix else None
        self.start_afresh()
        start = 0
        if head is not None and head.state is not None:  # restore mode saved the sequence after the head
            self.load_sequence(head.state)
            self.set_position(len(head.tokens), head.tokens)
            start = len(head.tokens)
        if start < len(prefix):
            self.eval(list(prefix[start:]))
        state = self.save_sequence(partial=True) if self.prefix_mode == "restore" and prefix else None
        self.prefix = Prefix(prefix, state)
        if self.state_cache is not None and prefix:
            self.state_cache.put(CachedState(prefix, self.save_sequence(), state))
        return False

    def _head(self, prompt: RenderedPrompt, prefix: tuple[int, ...], prompt_tokens: PrefixTokens) -> Prefix | None:
        """The prompt's fixed head, if its tokens begin this request's prefix: its tokens, and with
        ``restore`` the sequence saved after them (evaluated and saved on first use)."""
        if prompt.state_start is None:
            return None
        text = prompt.text[: prompt.state_start]  # the system prompt and template only: no caller text
        head = self._heads.get(text)
        if head is None:
            # One token of margin, as at the state's end: the head's last token may merge with the state.
            tokens = tuple(prompt_tokens(prompt, prompt.state_start)[:-1])
            if not tokens or prefix[: len(tokens)] != tokens:
                return None
            state = None
            if self.prefix_mode == "restore":
                self.start_afresh()
                self.eval(list(tokens))
                state = self.save_sequence()
            head = Prefix(tokens, state)
            if len(self._heads) >= MAX_HEADS:
                self._heads.pop(next(iter(self._heads)))
            self._heads[text] = head
        return head if prefix[: len(head.tokens)] == head.tokens else None

    def rewind(self, tokens: Sequence[int], saved: bytearray | None) -> None:
        """Return to the state right after ``tokens``: cut the KV cache back, or load the recurrent part saved
        there (a partial snapshot) and cut the attention cells past ``tokens``."""
        if self.holds(tokens):
            return  # nothing evaluated past them yet
        if not tokens:
            self.reset()
        elif saved is None:
            self.set_position(len(tokens))  # eval() removes the KV cells past it
        else:
            self.load_sequence(saved, partial=True)
            self.set_position(len(tokens), tokens)  # eval() removes the attention cells past it

    def holds(self, tokens: Sequence[int]) -> bool:
        """Whether the context holds exactly ``tokens``. The same length is not enough: with ``restore`` a
        cached state may be followed by another question of the same length."""
        n = self.llm.n_tokens
        return n == len(tokens) and (n == 0 or bool(np.array_equal(self.llm.input_ids[:n], tokens)))

    # -- the context's cells ---------------------------------------------------------

    def start_afresh(self) -> None:
        """Forget what the context holds (its cells, the held prefix), as a fresh server would."""
        self.reset()
        self.prefix = None

    def set_position(self, n: int, tokens: Sequence[int] | None = None) -> None:
        # Llama.eval() continues from n_tokens and records what it evaluated in input_ids; it has no public
        # way to move back but reset() (to 0), so the context sets them (and only here and in reset).
        if tokens is not None:
            self.llm.input_ids[:n] = tokens
        self.llm.n_tokens = n

    def reset(self) -> None:
        """Clear the cells (the held prefix is the caller's to forget: ``start_afresh``)."""
        self.llm.reset()
        self._short_cells = False
        memory = self.llama_cpp.llama_get_memory(self.llm.ctx)
        if memory is not None:
            # Forget every cell but leave the buffers' bytes: llama.cpp zeroed them once at start-up, empty
            # cells are masked out of attention and a recurrent state starts from zeros when its sequence
            # starts, so zeroing again changes no answer; it would write the whole KV buffer for each
            # restored question.
            self.llama_cpp.llama_memory_clear(memory, False)

    def save_sequence(self, *, partial: bool = False) -> bytearray:
        """Sequence 0's state: whole, or (``partial``) only the part that cannot be cut back, the recurrent
        states of a hybrid or recurrent memory (llama.cpp writes a plain KV cache whole either way)."""
        llama_cpp, ctx = self.llama_cpp, self.llm.ctx
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY if partial else 0
        size = llama_cpp.llama_state_seq_get_size_ext(ctx, 0, flags)
        state = bytearray(size)  # llama.cpp writes straight into it: no second copy of a state of megabytes
        written = llama_cpp.llama_state_seq_get_data_ext(
            ctx, (ctypes.c_uint8 * size).from_buffer(state), size, 0, flags
        )
        if written == 0:
            raise EngineError("llama.cpp could not save the sequence state for prefix reuse")
        del state[written:]
        return state

    def load_sequence(self, state: bytearray, *, partial: bool = False) -> None:
        """Replace sequence 0's state (``partial``: its recurrent part) with a saved one."""
        llama_cpp = self.llama_cpp
        self._short_cells = True  # how its cells were evaluated is not known here (splits.py)
        flags = llama_cpp.LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY if partial else 0
        # llama.cpp only reads it: point at the saved bytes themselves instead of copying them per question.
        data = (ctypes.c_uint8 * len(state)).from_buffer(state)
        if llama_cpp.llama_state_seq_set_data_ext(self.llm.ctx, data, len(state), 0, flags) == 0:
            raise EngineError("llama.cpp could not restore the sequence state for prefix reuse")
