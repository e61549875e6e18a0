"""How the tokens of one evaluation are cut into llama_decode calls, and how far back it starts.

llama.cpp's CPU kernels give the same logits for a token whatever other tokens share its llama_decode
call, as long as the call holds enough of them; below that they take another path. Without flash
attention the floor is two tokens (one token alone goes through the matrix-vector kernels). With it,
it is 64: the flash-attention kernel tiles a call's queries by 64 (ggml's ``GGML_FA_TILE_Q``) and reads
a smaller call with its vector kernel, which gives other logits; calls of 64 tokens or more give the same
logits, however a prompt is cut into them (docs/benchmarks.md, dated record).

So with flash attention every call that evaluates a prompt holds at least ``least`` tokens: a short
evaluation after a held prefix evaluates the prefix's last tokens again with it (their cells are rewritten
with the values they had), and a prompt of fewer than ``least`` tokens is evaluated whole (its cells, from a
short call, are evaluated again before anything is added to them). The build that runs is checked at
start-up (split_check.py).
"""

from __future__ import annotations

FLASH_ATTENTION_LEAST = 64  # ggml-cpu's GGML_FA_TILE_Q
PLAIN_LEAST = 2


def back_up(held: int, adding: int, least: int, *, short: bool) -> int:
    """How many of the ``held`` cells to evaluate again before ``adding`` tokens, so that the call holds at
    least ``least`` tokens and every cell kept was written by such a call. ``short``: the held cells may come
    from a call of fewer (a whole prompt of fewer than ``least`` tokens, or a loaded sequence): if there are
    fewer than ``least`` of them, all are evaluated again."""
    if adding == 0:
        return 0
    if short and held < least:
        return held
    return min(held, max(0, least - adding))


def cuts(n: int, step: int, least: int) -> list[int]:
    """Cut points of ``n`` tokens into calls of at most ``step`` tokens and, when there are two or more, at
    least ``least`` each (the last call borrows from the one before)."""
    points = list(range(0, n, step)) + [n]
    if len(points) > 2 and points[-1] - points[-2] < least:
        points[-2] = n - least
    return points
