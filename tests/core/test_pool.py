"""Pool summaries: made for many profiles at once (what-if pools), they equal the pool's own, whether
made one by one (a few profiles) or all at once in numpy (more)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from egs_hub.core.pool import _FEW, Pool, summaries
from egs_hub.core.profile import INF

from .builders import node

NODES = 2 * _FEW + 1
# (node, GPUs, start, end): ends may be INF, and GPUs may go over what is free (over-commit)
RESERVATIONS = st.lists(
    st.tuples(
        st.integers(min_value=0, max_value=NODES - 1),
        st.integers(min_value=1, max_value=4),
        st.integers(min_value=0, max_value=8).map(lambda n: n / 2),
        st.sampled_from([0.5, 1.0, 2.5, INF]),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(
    RESERVATIONS,
    st.lists(st.integers(min_value=0, max_value=4), min_size=NODES, max_size=NODES),
    st.integers(min_value=0, max_value=NODES),
)
def test_summaries_equal_the_pools_own(reservations, healthy: list[int], some: int):
    nodes = [node(f"n{i}", 4) for i in range(NODES)]
    pool = Pool("c1", nodes[0].shape, nodes, healthy)
    for i, gpus, start, length in reservations:
        pool.reserve(((i, gpus),), start, start + length)
    tail, hole, first, free_now = summaries(pool.profiles[:some], pool.width)
    assert np.array_equal(tail, pool.tail[:, :some])
    assert np.array_equal(hole, pool.hole[:, :some])
    assert np.array_equal(first, pool.first[:, :some])
    assert np.array_equal(free_now, pool.free_now[:some])
