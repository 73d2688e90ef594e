"""Where the client finds the service: its API v1 URL and a hub API token.

Inside a hub-spawned server the spawner sets ``EGS_API_URL`` (ending in
``/api/v1/``) and the hub sets ``JUPYTERHUB_API_TOKEN``; elsewhere set
``EGS_API_URL`` and ``EGS_API_TOKEN`` (a token from ``<hub>/hub/token``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from .errors import EGSConfigError


@dataclass(frozen=True)
class Settings:
    url: str
    token: str | None
    timeout: float


def resolve_settings(
    url: str | None, token: str | None, timeout: float, environ: Mapping[str, str] = os.environ
) -> Settings:
    """The URL (ending in '/') and token given, else the environment's."""
    url = url or environ.get("EGS_API_URL")
    if not url:
        raise EGSConfigError(
            "no EGS service URL: pass url= or set EGS_API_URL to the service's API, "
            "e.g. http://127.0.0.1:8000/services/egs/api/v1/"
        )
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise EGSConfigError(f"the EGS service URL {url!r} is not an http(s) URL like http://HOST/services/egs/api/v1/")
    if not timeout > 0:
        raise EGSConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
    token = token or environ.get("EGS_API_TOKEN") or environ.get("JUPYTERHUB_API_TOKEN") or None
    return Settings(url if url.endswith("/") else url + "/", token, timeout)
