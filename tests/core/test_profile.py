"""Profiles: many changes added at once equal the same changes added one by one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core.profile import INF, Profile

# (start, end, delta): ends may be INF, and an end may fall on another change's start
CHANGES = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=8).map(lambda n: n / 2),
        st.sampled_from([0.5, 1.0, 2.5, 4.0, INF]),
        st.integers(min_value=-3, max_value=3),
    ).filter(lambda c: c[0] < c[1]),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(CHANGES, CHANGES)
def test_add_many_equals_adding_one_by_one(first: list, then: list):
    one_by_one, at_once = Profile(4), Profile(4)
    for start, end, delta in first:  # a profile with steps already
        one_by_one.add(start, end, delta)
        at_once.add(start, end, delta)
    for start, end, delta in then:
        one_by_one.add(start, end, delta)
    at_once.add_many(then)
    probes = sorted({0.0, *one_by_one.times, *at_once.times, 9.0})
    assert [at_once.at(t) for t in probes] == [one_by_one.at(t) for t in probes]
    assert at_once.maximum(0.0, INF) == one_by_one.maximum(0.0, INF)
