"""Where the clients find the service (environment defaults), and failures to reach it."""

from __future__ import annotations

import pytest

from egs_hub.client import AsyncEGSClient, EGSClient, EGSConfigError, EGSConnectionError, EGSError
from egs_hub.embedded import free_port

ENVIRONMENT = ("EGS_API_URL", "EGS_API_TOKEN", "JUPYTERHUB_API_TOKEN")


@pytest.fixture
def environ(monkeypatch):
    for name in ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_without_a_url_the_error_says_how_to_give_one(environ):
    with pytest.raises(EGSConfigError) as error:
        EGSClient()
    assert error.value.status == 0 and isinstance(error.value, EGSError)
    assert str(error.value).startswith("no EGS service URL: pass url= or set EGS_API_URL")


def test_a_url_that_is_not_http_is_refused(environ):
    with pytest.raises(EGSConfigError) as error:
        EGSClient("127.0.0.1:8000/services/egs/api/v1/")
    assert "is not an http(s) URL" in str(error.value)


def test_the_environment_gives_url_and_token(environ):
    environ.setenv("EGS_API_URL", "http://egs.example/services/egs/api/v1")
    environ.setenv("JUPYTERHUB_API_TOKEN", "hub-token")
    with EGSClient() as client:
        assert client.url == "http://egs.example/services/egs/api/v1/"
        assert client.settings.token == "hub-token"
    environ.setenv("EGS_API_TOKEN", "egs-token")
    with EGSClient() as client:
        assert client.settings.token == "egs-token"
    with EGSClient("http://other.example/api/v1/", "given", timeout=5) as client:
        assert (client.url, client.settings.token, client.settings.timeout) == (
            "http://other.example/api/v1/",
            "given",
            5,
        )


def test_timeout_must_be_positive(environ):
    with pytest.raises(EGSConfigError, match="timeout must be a positive number of seconds, not 0"):
        EGSClient("http://egs.example/", timeout=0)


def test_an_unreachable_service_is_an_error_naming_the_url(environ):
    url = f"http://127.0.0.1:{free_port()}/services/egs/api/v1/"
    with EGSClient(url) as client, pytest.raises(EGSConnectionError) as error:
        client.health()
    assert error.value.status == 0
    assert str(error.value).startswith(f"cannot reach the EGS service at {url}health: ")


async def test_an_unreachable_service_is_an_error_for_the_async_client_too(environ):
    url = f"http://127.0.0.1:{free_port()}/api/v1/"
    async with AsyncEGSClient(url) as client:
        with pytest.raises(EGSConnectionError) as error:
            await client.slices()
    assert str(error.value).startswith(f"cannot reach the EGS service at {url}slices: ")
