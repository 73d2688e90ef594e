"""What the sync and the async client share about HTTP: headers, sending a call again, and failures to
connect as EGSErrors.

A call is sent again (``Retries``) when no answer came (the connection failed or timed out) or the answer
was a 502 or 503 (the hub's proxy while the service restarts, a standby without a leader, a cluster or the
hub not answering): at most ``most`` more times, waiting ``backoff`` seconds, twice as long each time (with
jitter, and at least the answer's ``Retry-After``). Only calls that may be sent twice: a GET, and a create
that carries an ``Idempotency-Key`` (the same on each try, so the service makes it once, issue 45). Any
other call is answered as it came: a POST or DELETE that got no answer may or may not have been done.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import httpx

from .. import __version__
from .config import Settings
from .errors import EGSConfigError, EGSConnectionError

RETRIED_STATUSES = frozenset({502, 503})
MAX_WAIT = 30.0  # seconds: the longest wait before a try, whatever Retry-After says


def headers(settings: Settings) -> dict[str, str]:
    values = {"Accept": "application/json", "User-Agent": f"egs-hub-client/{__version__}"}
    if settings.token:
        values["Authorization"] = f"token {settings.token}"
    return values


@dataclass(frozen=True)
class Retries:
    """``most``: tries after the first; ``backoff``: seconds before the first of them."""

    most: int = 4
    backoff: float = 0.5

    def __post_init__(self) -> None:
        if isinstance(self.most, bool) or not isinstance(self.most, int) or self.most < 0:
            raise EGSConfigError(f"retries must be a whole number from 0, not {self.most!r}")
        if not self.backoff >= 0:
            raise EGSConfigError(f"backoff must be a number of seconds from 0, not {self.backoff!r}")

    def wait(self, retried: bool, tries: int, status: int | None, retry_after: str | None = None) -> float | None:
        """Seconds to wait before sending a call again after its ``tries``-th try got ``status`` (None: no
        answer); None: answer now (the call may not be ``retried``, the answer is final, or no tries are left)."""
        if not retried or tries > self.most or (status is not None and status not in RETRIED_STATUSES):
            return None
        return self.delay(tries, retry_after, random.random())

    def delay(self, tries: int, retry_after: str | None, spread: float) -> float:
        """``backoff`` doubled for each try after the first, times 0.5 to 1 (``spread`` 0 to 1) so that
        clients that failed together do not come back together; at least ``Retry-After``, at most MAX_WAIT."""
        wait = self.backoff * 2 ** (tries - 1) * (0.5 + spread / 2)
        if retry_after is not None and retry_after.strip().isdigit():
            wait = max(wait, float(retry_after))
        return min(wait, MAX_WAIT)


def connection_error(url: str, timeout: float, error: httpx.TransportError) -> EGSConnectionError:
    """The failure to get an answer from ``url``, saying which URL and why."""
    if isinstance(error, httpx.TimeoutException):
        why = f"no answer within {timeout:g} s"
    else:
        why = str(error) or type(error).__name__
    return EGSConnectionError(f"cannot reach the EGS service at {url}: {why}; check EGS_API_URL and that it runs")
