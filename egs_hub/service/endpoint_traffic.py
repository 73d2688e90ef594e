"""The requests at each endpoint's proxy path, as the proxy saw them (in memory, on the leader).

The proxy says when a request begins, waits for a ready replica, and ends (with its latency and
whether it failed); the endpoint pass takes the load from it (core/endpoints.Load) to scale, and
the API's answers and the Prometheus exposition read its figures over the last ``WINDOW``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from ..core.endpoints import SCALE_DOWN_WINDOW, Load
from ..core.stats import percentile

WINDOW = timedelta(seconds=60)  # what requests/s, latencies and errors are measured over


@dataclass(frozen=True)
class Figures:
    requests_per_second: float
    latency_p50: float | None
    latency_p95: float | None
    errors: int  # in WINDOW
    in_flight: int
    requests_total: int
    errors_total: int


@dataclass
class _Traffic:
    in_flight: int = 0
    waiting: int = 0
    peak: int = 0
    last_request: datetime | None = None
    peaks: deque[tuple[datetime, int]] = field(default_factory=deque)  # (pass, peak since the one before)
    done: deque[tuple[datetime, float, bool]] = field(default_factory=deque)  # (end, seconds, failed)
    requests_total: int = 0
    errors_total: int = 0

    def busy(self) -> None:
        self.peak = max(self.peak, self.in_flight + self.waiting)


class Traffic:
    def __init__(self):
        self._of: dict[int, _Traffic] = {}

    def _get(self, endpoint_id: int) -> _Traffic:
        return self._of.setdefault(endpoint_id, _Traffic())

    def begin(self, endpoint_id: int, now: datetime) -> None:
        traffic = self._get(endpoint_id)
        traffic.in_flight += 1
        traffic.last_request = now
        traffic.busy()

    def wait(self, endpoint_id: int, change: int) -> None:
        """A request begins (1) or stops (-1) waiting for a ready replica."""
        traffic = self._get(endpoint_id)
        traffic.waiting += change
        traffic.busy()

    def end(self, endpoint_id: int, now: datetime, seconds: float, failed: bool) -> None:
        traffic = self._get(endpoint_id)
        traffic.in_flight -= 1
        traffic.last_request = now
        traffic.done.append((now, seconds, failed))
        traffic.requests_total += 1
        traffic.errors_total += failed
        self._trim(traffic, now)

    def last_request(self, endpoint_id: int) -> datetime | None:
        traffic = self._of.get(endpoint_id)
        return traffic.last_request if traffic is not None else None

    def take(self, endpoint_id: int, now: datetime, last_request: datetime | None) -> Load:
        """The load since the last take (``last_request``: the stored one, for an endpoint with no
        request since the service started)."""
        traffic = self._get(endpoint_id)
        if traffic.last_request is None:
            traffic.last_request = last_request
        traffic.peaks.append((now, traffic.peak))
        while traffic.peaks and now - traffic.peaks[0][0] > SCALE_DOWN_WINDOW:
            traffic.peaks.popleft()
        load = Load(
            in_flight=traffic.in_flight,
            waiting=traffic.waiting,
            peak=traffic.peak,
            recent_peak=max(peak for _, peak in traffic.peaks),
            last_request=traffic.last_request,
        )
        traffic.peak = traffic.in_flight + traffic.waiting
        return load

    def figures(self, endpoint_id: int, now: datetime) -> Figures:
        traffic = self._get(endpoint_id)
        self._trim(traffic, now)
        seconds = [s for _, s, _ in traffic.done]
        return Figures(
            requests_per_second=len(traffic.done) / WINDOW.total_seconds(),
            latency_p50=percentile(seconds, 50),
            latency_p95=percentile(seconds, 95),
            errors=sum(failed for _, _, failed in traffic.done),
            in_flight=traffic.in_flight,
            requests_total=traffic.requests_total,
            errors_total=traffic.errors_total,
        )

    def forget(self, endpoint_id: int) -> None:
        self._of.pop(endpoint_id, None)

    @staticmethod
    def _trim(traffic: _Traffic, now: datetime) -> None:
        while traffic.done and now - traffic.done[0][0] > WINDOW:
            traffic.done.popleft()
