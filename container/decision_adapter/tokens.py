"""Prompt text to tokens, with the caller's text kept as plain text.

Caller text is never parsed for control tokens: text such as ``<|im_end|>`` inside a
state, question, option or chat message stays text, so a request cannot close its own
turn and open a system or assistant turn. The tokenizer is given the spans of the
caller's text (``protect``) and treats control-token text as a control token only
outside them.

The fixed text before the caller's (the system prompt and the template up to the user
turn) is the same in every prompt of a kind, so its tokens are kept (``MAX_HEADS`` of
them) rather than tokenized again for every prompt.
"""

from __future__ import annotations

import bisect
import ctypes
import re
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from .questions import RenderedPrompt

if TYPE_CHECKING:
    from llama_cpp import Llama, llama_vocab_p

MAX_HEADS = 4  # heads kept, tokenized and (restore mode) saved: one per system prompt and template


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    """How many tokens two token sequences share from the start."""
    n = min(len(a), len(b))
    differ = np.flatnonzero(np.asarray(a[:n], dtype=np.int64) != np.asarray(b[:n], dtype=np.int64))
    return int(differ[0]) if differ.size else n


def control_tokens(
    llama_cpp: ModuleType, vocab: llama_vocab_p, n_vocab: int
) -> tuple[dict[str, int], re.Pattern[str] | None]:
    """Texts that llama.cpp turns into control tokens when asked to parse special tokens, and a pattern
    matching any of them (None when there are none)."""
    wanted = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_UNKNOWN
    texts: dict[str, int] = {}
    for token in range(n_vocab):
        if llama_cpp.llama_vocab_get_attr(vocab, token) & wanted:
            spelled: bytes = llama_cpp.llama_vocab_get_text(vocab, token)
            text = spelled.decode("utf-8", errors="replace")
            if text:
                texts.setdefault(text, token)
    if not texts:
        return texts, None
    longest_first = sorted(texts, key=len, reverse=True)  # as llama.cpp matches them
    return texts, re.compile("|".join(map(re.escape, longest_first)))


def piece_byte_lengths(llama_cpp: ModuleType, vocab: llama_vocab_p, n_vocab: int) -> npt.NDArray[np.int64]:
    """How many bytes of text each token spells (control tokens as their text), to cut prompts by offset."""
    buffer = ctypes.create_string_buffer(256)
    lengths = [llama_cpp.llama_token_to_piece(vocab, t, buffer, len(buffer), 0, True) for t in range(n_vocab)]
    return np.asarray([n if n >= 0 else 10**9 for n in lengths], dtype=np.int64)  # < 0: longer than 256


def longest_token_chars(llama_cpp: ModuleType, vocab: llama_vocab_p, n_vocab: int) -> int:
    """The length of the vocabulary's longest token text (at least 1)."""
    return max(1, max(len(llama_cpp.llama_vocab_get_text(vocab, t)) for t in range(n_vocab)))


class PromptTokenizer:
    """The model's tokenizer with control-token text kept as text inside the caller's spans, and the
    tokens of recent fixed heads kept."""

    def __init__(self, llama_cpp: ModuleType, llm: Llama) -> None:
        self._llm = llm
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        n_vocab = llm.n_vocab()
        self.bos_id: int = llama_cpp.llama_vocab_bos(vocab)
        self._add_bos: bool = llama_cpp.llama_vocab_get_add_bos(vocab)
        self.bos_text: str = llama_cpp.llama_vocab_get_text(vocab, self.bos_id).decode() if self.bos_id >= 0 else ""
        self.piece_bytes = piece_byte_lengths(llama_cpp, vocab, n_vocab)
        self._control_tokens, self.control_re = control_tokens(llama_cpp, vocab, n_vocab)
        self._head_tokens: dict[str, list[int]] = {}  # fixed text before the caller's -> its tokens

    def tokenize(self, text: str, protect: tuple[tuple[int, int], ...] = ()) -> list[int]:
        """The prompt's tokens; control-token text counts as a control token only outside ``protect``.

        ``protect`` holds the spans of caller-supplied text. When no control-token text
        overlaps them (the usual case) llama.cpp tokenizes the whole text at once. Otherwise
        the text is split as llama.cpp splits it, at control-token text outside the spans,
        and each piece in between is tokenized as plain text, the spans' control text included.

        The fixed text before the caller's (the system prompt and the template up to the user
        turn) is tokenized once: llama.cpp tokenizes the text between control tokens piece by
        piece, so the text is cut after the last control token before the caller's span, the
        head's tokens are taken from a cache and only the rest is tokenized. The first prompt
        with a new head checks the cut against tokenizing it whole; a head whose cut changes
        any token is never cut.
        """
        cut = self._head_cut(text, protect)
        if not cut:
            return self.tokenize_whole(text, protect)
        head = self._head_tokens.get(text[:cut])
        if head == []:  # checked before: this head is never cut
            return self.tokenize_whole(text, protect)
        rest = self._tokenize_pieces(text[cut:], tuple((a - cut, b - cut) for a, b in protect))
        if head is None:
            head = self.tokenize_whole(text[:cut])
            whole = self.tokenize_whole(text, protect)
            if len(self._head_tokens) >= MAX_HEADS:
                self._head_tokens.pop(next(iter(self._head_tokens)))
            self._head_tokens[text[:cut]] = head if whole == head + rest else []
            return whole
        return head + rest

    def tokenize_whole(self, text: str, protect: tuple[tuple[int, int], ...] = ()) -> list[int]:
        """The text's tokens, tokenized in one go with no cached head: what ``tokenize`` returns for any text,
        and what a cut prompt is checked against."""
        return self._with_bos(self._tokenize_pieces(text, protect))

    def prompt_tokens(self, prompt: RenderedPrompt, end: int | None = None) -> list[int]:
        """Tokens of ``prompt.text[:end]``, the caller's content kept as plain text."""
        text = prompt.text if end is None else prompt.text[:end]
        span = prompt.content_span
        return self.tokenize(text, ((span[0], min(span[1], len(text))),) if span else ())

    def _head_cut(self, text: str, protect: tuple[tuple[int, int], ...]) -> int:
        """The end of the last control token before the caller's first span, if fixed text follows it (else 0)."""
        if not protect or self.control_re is None:
            return 0
        first = min(start for start, _ in protect)
        ends = [match.end() for match in self.control_re.finditer(text, 0, first)]
        return ends[-1] if ends and ends[-1] < first else 0

    def _with_bos(self, tokens: list[int]) -> list[int]:
        if self._add_bos and self.bos_id >= 0 and (not tokens or tokens[0] != self.bos_id):
            tokens.insert(0, self.bos_id)
        return tokens

    def _tokenize_pieces(self, text: str, protect: tuple[tuple[int, int], ...]) -> list[int]:
        spans = sorted(protect)
        starts = [start for start, _ in spans]

        def callers(match: re.Match[str]) -> bool:
            # The spans do not overlap: only the last span starting before the match's end can overlap it.
            i = bisect.bisect_left(starts, match.end()) - 1
            return i >= 0 and match.start() < spans[i][1]

        llm = self._llm
        matches = list(self.control_re.finditer(text)) if self.control_re and protect else []
        if not any(map(callers, matches)):
            return llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        tokens: list[int] = []
        at = 0
        for match in matches:
            if callers(match):
                continue
            if match.start() > at:
                tokens += llm.tokenize(text[at : match.start()].encode("utf-8"), add_bos=False, special=False)
            tokens.append(self._control_tokens[match.group()])
            at = match.end()
        if at < len(text):
            tokens += llm.tokenize(text[at:].encode("utf-8"), add_bos=False, special=False)
        return tokens
