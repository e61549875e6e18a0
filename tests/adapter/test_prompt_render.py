"""A state nested deeper than json.dumps can write is the caller's 422 naming the field, not a worker's 500."""

from __future__ import annotations

import pytest

from decision_adapter import prompt
from decision_adapter.caller_errors import InvalidValue


def test_a_state_too_deep_to_render_is_refused_naming_the_field():
    state: list = []
    for _ in range(100_000):  # built without recursion; deeper than json.dumps can write
        state = [state]
    with pytest.raises(InvalidValue) as refused:
        prompt.render_state(state)
    assert refused.value.field == "state" and refused.value.status == 422
    assert prompt.render_state({"b": [1, {"a": 2}]}) == '{"b": [1, {"a": 2}]}'  # ordinary nesting as before
