"""The churn soak: users submitting short GPRs, releasing, cancelling, editing and reading
(churn.py) for ``EGS_SOAK_SECONDS`` (60 by default; `make test` runs it for 600 beside the rest
of the suite) against a real egs-hub. The EGS service must never die (its supervisor logs every
death, and would start it again), answer every request, and never answer 5xx."""

from __future__ import annotations

import asyncio
import os

from egs_hub.embedded import free_port

from .churn import churn
from .hub import start_hub, stop_hub

SECONDS = float(os.environ.get("EGS_SOAK_SECONDS", "60"))


def test_churn_soak_never_crashes_the_service_nor_answers_5xx(tmp_path):
    hub = start_hub(str(tmp_path), f"sqlite:///{tmp_path}/egs.sqlite", free_port())
    try:
        first = hub.service_pid()
        tally = asyncio.run(churn(hub, SECONDS))
        deaths = [line for line in hub.log().splitlines() if "the EGS service (pid" in line]
        assert not deaths, "\n".join(deaths)
        assert hub.service_pid() == first
        assert tally.service_pids == [first]
        assert not tally.errors, "\n".join(tally.errors[:10])
        assert tally.gateway == 0
        unanswered = {key: n for key, n in tally.answers.items() if key.endswith("no answer")}
        assert not unanswered, unanswered
        assert tally.answers["submit 201"] > SECONDS, tally.answers  # it did churn
    finally:
        stop_hub(hub)
