"""What the sync and the async client share about HTTP: headers, and failures to connect as EGSErrors."""

from __future__ import annotations

import httpx

from .. import __version__
from .config import Settings
from .errors import EGSConnectionError


def headers(settings: Settings) -> dict[str, str]:
    values = {"Accept": "application/json", "User-Agent": f"egs-hub-client/{__version__}"}
    if settings.token:
        values["Authorization"] = f"token {settings.token}"
    return values


def connection_error(url: str, timeout: float, error: httpx.TransportError) -> EGSConnectionError:
    """The failure to get an answer from ``url``, saying which URL and why."""
    if isinstance(error, httpx.TimeoutException):
        why = f"no answer within {timeout:g} s"
    else:
        why = str(error) or type(error).__name__
    return EGSConnectionError(f"cannot reach the EGS service at {url}: {why}; check EGS_API_URL and that it runs")
