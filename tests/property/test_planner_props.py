"""The planner over arbitrary input: never raises, bounded output, deterministic."""

from __future__ import annotations

from datetime import datetime

from hypothesis import given
from hypothesis import strategies as st

from memory_orchestrator.models import QueryPlan
from memory_orchestrator.pipeline.planner import plan_query
from memory_orchestrator.text import normalize
from tests.property.support import BIG_INTS, MOMENTS, PROPS, TEXT


@PROPS
@given(
    query=TEXT,
    task=st.none() | TEXT,
    now=MOMENTS,
    known=st.lists(TEXT, max_size=8),
    hop_budget=BIG_INTS,
    max_hops=BIG_INTS,
    max_subqueries=BIG_INTS,
    expand=st.none() | st.booleans(),
)
def test_any_input_gives_a_valid_bounded_plan(
    query: str,
    task: str | None,
    now: datetime,
    known: list[str],
    hop_budget: int,
    max_hops: int,
    max_subqueries: int,
    expand: bool | None,
) -> None:
    def make() -> QueryPlan:
        return plan_query(
            query,
            task=task,
            now=now,
            known_entities=known,
            hop_budget=hop_budget,
            max_hops=max_hops,
            max_subqueries=max_subqueries,
            expand=expand,
        )

    plan = make()
    assert plan.raw_query == query
    assert len(plan.subqueries) <= max(1, max_subqueries)
    assert plan.subqueries or not normalize(query)  # only an empty query asks nothing
    assert 0 <= plan.hop_budget <= max(0, max_hops)
    assert 0.0 <= plan.confidence <= 0.95
    # Output grows at most linearly with the input: no subquery is longer than the
    # normalised query twice over plus the longest known name, or the task.
    text = normalize(query)
    longest_name = max((len(normalize(k)) for k in known), default=0)
    bound = 2 * (len(text) + longest_name) + len(normalize(task or "")) + 1
    assert all(len(sub) <= bound for sub in plan.subqueries)
    assert len(plan.terms) <= len(text)
    assert len(plan.entities) <= len(text) + len(known)
    if plan.time_window is not None:
        window = plan.time_window
        assert window.start is None or window.end is None or window.start <= window.end
        assert plan.time_phrase
    again = make()
    assert again == plan
