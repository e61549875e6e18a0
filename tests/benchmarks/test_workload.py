"""The short tickets of the concurrency table on short prompts (issue #53): a state of 6 to 30 tokens with the
embedded model's own tokenizer, 2 to 5 options, every state different; and the flag that asks for them."""

from __future__ import annotations

import llama_cpp
import pytest

from benchmarks import llama_server
from benchmarks.workload import short_tickets
from workshop_lib.models import embedded_gguf_path


def test_short_tickets_have_6_to_30_tokens_of_state_and_2_to_5_options():
    vocab = llama_cpp.Llama(str(embedded_gguf_path()), vocab_only=True, verbose=False)
    tickets = short_tickets(60)
    lengths = [len(vocab.tokenize(t.state.encode(), add_bos=False, special=False)) for t in tickets]
    assert min(lengths) >= 6 and max(lengths) <= 30, lengths
    assert {len(t.options) for t in tickets} == {2, 3, 4, 5}
    assert len({t.state for t in tickets}) == len(tickets)  # every state different
    assert all(t.labels == tuple(oid for oid, _ in t.options) and t.expected in t.labels for t in tickets)


def test_short_tickets_go_with_the_concurrency_table_only(capsys):
    with pytest.raises(SystemExit):
        llama_server.main(["--short-tickets"])
    assert "--short-tickets goes with --concurrency-only" in capsys.readouterr().err
