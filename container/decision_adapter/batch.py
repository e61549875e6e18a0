"""Several prompts' suffixes on one shared prefix, evaluated in one llama.cpp batch.

A request's prompts share a prefix (its state, and for rotations its question); what follows differs
per prompt and is short. One ``llama_decode`` per suffix reads the model's weights once per suffix;
one decode over all of them reads them once for the lot. So the prefix stays in sequence 0, is
copied to one more sequence per suffix (``llama_memory_seq_cp``: in a unified KV cache the cells are
shared, not copied), each suffix goes into its own sequence at the positions after the prefix, with
logits asked for at its last token only, and one decode evaluates them all. Each token attends to
its own sequence's cells only, so a suffix sees the prefix and itself, as when it is evaluated alone.
Afterwards the other sequences and sequence 0's suffix are removed: the context holds the prefix.

``plan_chunks`` (pure) splits the suffixes so each decode fits the context: at most ``n_batch``
tokens and ``n_seq_max`` sequences, and no more KV cells than the context has (the prefix once, plus
every suffix of the chunk). ``decode_suffixes`` runs one chunk.
"""

from __future__ import annotations

import numpy as np


class DecodeFailed(RuntimeError):
    """llama_decode returned non-zero (2: the time limit's abort callback stopped it)."""


def plan_chunks(lengths: list[int], prefix_len: int, *, n_batch: int, n_seq_max: int, n_ctx: int) -> list[list[int]]:
    """The suffixes' indices, in order, grouped into decodes that fit; a suffix that fits no decode on its own
    (longer than ``n_batch``, or than the context after the prefix) is left out, for one-after-another."""
    chunks: list[list[int]] = []
    current: list[int] = []
    tokens = 0
    for index, length in enumerate(lengths):
        if length < 1 or length > n_batch or prefix_len + length > n_ctx:
            continue
        if current and (tokens + length > n_batch or len(current) == n_seq_max
                        or prefix_len + tokens + length > n_ctx):
            chunks.append(current)
            current, tokens = [], 0
        current.append(index)
        tokens += length
    if current:
        chunks.append(current)
    return chunks


def decode_suffixes(llama_cpp, ctx, prefix_len: int, suffixes: list[list[int]], n_vocab: int) -> list[np.ndarray]:
    """Evaluate each suffix after the ``prefix_len`` cells sequence 0 holds, in one llama_decode; the logits at
    each suffix's last token (float32 copies). Whatever happens, sequence 0 is left holding the prefix only
    and the other sequences nothing (after a failed decode the caller clears the context anyway)."""
    memory = llama_cpp.llama_get_memory(ctx)
    total = sum(len(s) for s in suffixes)
    llama_cpp.llama_memory_seq_rm(memory, 0, prefix_len, -1)
    batch = llama_cpp.llama_batch_init(total, 0, 1)
    try:
        for seq in range(1, len(suffixes)):
            llama_cpp.llama_memory_seq_cp(memory, 0, seq, -1, -1)
        token = np.ctypeslib.as_array(batch.token, shape=(total,))
        pos = np.ctypeslib.as_array(batch.pos, shape=(total,))
        n_seq_id = np.ctypeslib.as_array(batch.n_seq_id, shape=(total,))
        logits = np.ctypeslib.as_array(batch.logits, shape=(total,))
        n_seq_id[:] = 1
        logits[:] = 0
        last = []
        i = 0
        for seq, suffix in enumerate(suffixes):
            n = len(suffix)
            token[i:i + n] = suffix
            pos[i:i + n] = np.arange(prefix_len, prefix_len + n)
            for j in range(i, i + n):
                batch.seq_id[j][0] = seq
            i += n
            logits[i - 1] = 1
            last.append(i - 1)
        batch.n_tokens = total
        code = llama_cpp.llama_decode(ctx, batch)
        if code != 0:
            raise DecodeFailed(f"llama_decode returned {code} for a batch of {len(suffixes)} sequences, "
                               f"{total} tokens")
        return [np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, index), shape=(n_vocab,)).copy()
                for index in last]
    finally:
        llama_cpp.llama_batch_free(batch)
        for seq in range(1, len(suffixes)):
            llama_cpp.llama_memory_seq_rm(memory, seq, -1, -1)
        llama_cpp.llama_memory_seq_rm(memory, 0, prefix_len, -1)


# The start-up check: a prefix and suffixes of lengths at which llama.cpp builds have been seen to give the
# second and later sequences of a batch other logits than the same suffix evaluated alone.
CHECK_TEXT = ("A customer wrote about order 4411: the parcel arrived late, the screen was cracked and the box was "
              "open. They ask for a replacement or a refund, whichever comes first, and want to know who pays for "
              "the return shipping. Which team should answer, and how urgent is it? Options follow, one per line.")
CHECK_PREFIX = 48
CHECK_LENGTHS = (14, 14, 11, 20, 30, 30)
CHECK_TOLERANCE = 1e-3  # largest logit difference accepted; rounding between batch shapes stays far below


def disagreement(llama_cpp, ctx, tokens: list[int], evaluate, last_logits, reset, n_vocab: int) -> float:
    """The largest logit difference between the check's suffixes evaluated one after another (``evaluate``:
    tokens from the context's end; ``last_logits``; ``reset``: an empty context) and in one batch."""
    need = CHECK_PREFIX + max(CHECK_LENGTHS) + len(CHECK_LENGTHS)
    tokens = (tokens * (need // max(len(tokens), 1) + 1))[:need]
    prefix = tokens[:CHECK_PREFIX]
    suffixes = [tokens[CHECK_PREFIX + i:CHECK_PREFIX + i + n] for i, n in enumerate(CHECK_LENGTHS)]
    alone = []
    for suffix in suffixes:
        reset()
        evaluate(prefix)
        evaluate(suffix)
        alone.append(last_logits())
    reset()
    evaluate(prefix)
    together = decode_suffixes(llama_cpp, ctx, len(prefix), suffixes, n_vocab)
    reset()
    return max(float(np.max(np.abs(a - b))) for a, b in zip(alone, together))
