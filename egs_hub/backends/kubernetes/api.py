"""What the backend needs around kubernetes_asyncio: the errors a broken API raises, and raw JSON responses.

The backend reads objects as plain dicts (``_preload_content=False``) so that the
pure functions in nodes.py see exactly what the API sent; kubernetes_asyncio then
leaves the status code to the caller, which ``json_of`` checks.
"""

from __future__ import annotations

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

# What a broken or unreachable API server raises through kubernetes_asyncio.
API_ERRORS = (ApiException, aiohttp.ClientError, OSError, TimeoutError)


def describe_error(error: BaseException) -> str:
    """One line for an API error: "HTTP 503 (Service Unavailable)", or the connection error's own words."""
    if isinstance(error, ApiException):
        return f"HTTP {error.status} ({error.reason})" if error.status else str(error.reason)
    return str(error) or type(error).__name__


async def json_of(response: aiohttp.ClientResponse) -> dict:
    """The body of a raw response; ApiException (with the API's message) when the status is not 2xx."""
    try:
        body = await response.json(content_type=None)
        if not 200 <= response.status < 300:
            message = body.get("message") if isinstance(body, dict) else None
            raise ApiException(status=response.status, reason=message or response.reason)
        return body
    finally:
        response.release()


async def json_or_none(call) -> dict | None:
    """``json_of`` the response a raw read (a coroutine) returns; None when the object is not found."""
    try:
        return await json_of(await call)
    except ApiException as e:
        if e.status == 404:
            return None
        raise


async def text_of(response: aiohttp.ClientResponse) -> str:
    """A raw response's body as text (a pod's log, a page through its proxy: text/plain, which the client
    would read as JSON); ApiException when the status is not 2xx."""
    try:
        body = await response.text(errors="replace")
        if not 200 <= response.status < 300:
            raise ApiException(status=response.status, reason=response.reason)
        return body
    finally:
        response.release()
