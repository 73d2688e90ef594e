"""The pod webhook's HTTPS listener in-process: a certificate made here, a real AdmissionReview, the store's slices.

The service's own route is tested end to end in test_slices_on_clusters.py;
this is the listener the API server calls (EGSService.webhook_port).
"""

from __future__ import annotations

import datetime
import json
import pathlib
import ssl

import pytest
import tornado.httpclient
from traitlets import TraitError

from egs_hub.embedded import free_port
from egs_hub.service.app import EGSService
from egs_hub.service.clusters import Clusters, ClusterState
from egs_hub.service.handlers import webhooks

from ..k8s.test_webhook import patched
from ..k8s.tls import self_signed
from .stores import store_with_slice

ADMISSION = pathlib.Path(__file__).parents[1] / "k8s" / "admission"


class StoreOnlyService(EGSService):
    """The service with a store and a cluster registry but no hub: all the webhook needs."""

    def __init__(self, sessions, registry, **kw):
        super().__init__(**kw)
        self.sessions = sessions
        self.registry = registry


@pytest.fixture
def service(tmp_path):
    sessions = store_with_slice(tmp_path, "team-a", {"east": ("team-a",)})
    registry = Clusters(sessions, datetime.datetime.now)
    for name in ("east", "west"):
        registry.states[name] = ClusterState(name, backend=None, origin="config", where="test")
    cert, key = self_signed(tmp_path, "egs-hub-webhook")
    yield StoreOnlyService(
        sessions,
        registry,
        webhook_port=free_port(),
        webhook_ip="127.0.0.1",
        webhook_certfile=str(cert),
        webhook_keyfile=str(key),
    )
    sessions.kw["bind"].dispose()


def review() -> dict:
    return json.loads((ADMISSION / "gpu-deployment-pod.json").read_text())


async def test_the_https_listener_answers_reviews_per_cluster(service):
    server = service._webhook_server(webhooks.make_app(service, service.body_limit))
    context = ssl.create_default_context(cafile=service.webhook_certfile)
    http = tornado.httpclient.AsyncHTTPClient()
    base = f"https://127.0.0.1:{service.webhook_port}{service.prefix}webhooks/pods/"
    try:
        sent = review()
        assert sent["request"]["namespace"] == "team-a"
        answer = await http.fetch(base + "east", method="POST", body=json.dumps(sent), ssl_options=context)
        spec = patched(sent, json.loads(answer.body))["spec"]
        assert spec["nodeSelector"]["egs.io/slice"] == "team-a"
        # team-a is the slice's namespace on east only
        answer = await http.fetch(base + "west", method="POST", body=json.dumps(sent), ssl_options=context)
        assert "patch" not in json.loads(answer.body)["response"]
        refused = await http.fetch(base + "east", method="POST", body="{}", ssl_options=context, raise_error=False)
        assert refused.code == 400 and "not an AdmissionReview" in json.loads(refused.body)["message"]
        # plain HTTP is not served there
        with pytest.raises((ConnectionError, tornado.httpclient.HTTPClientError, ssl.SSLError, OSError)):
            await http.fetch(base.replace("https", "http") + "east", method="POST", body="{}", request_timeout=5)
    finally:
        server.stop()


def test_a_webhook_port_needs_a_certificate_and_key(service):
    service.webhook_keyfile = ""
    with pytest.raises(TraitError, match="webhook_certfile and webhook_keyfile are needed"):
        service._webhook_server(webhooks.make_app(service, service.body_limit))


BAD_REVIEWS = {
    "nested 100000 deep": (b"[" * 100_000 + b"]" * 100_000, "nests deeper than 64 levels"),
    "a field nested 65 deep": (
        b'{"request": ' + b"[" * 64 + b"]" * 64 + b"}",
        "nests deeper than 64 levels (at request)",
    ),
    "not UTF-8": (b'{"request": "\xff"}', "not valid UTF-8"),
    "a lone surrogate": (b'{"request": {"namespace": "\\udc80"}}', "request.namespace contains text that is not valid"),
}


@pytest.mark.parametrize("case", BAD_REVIEWS.values(), ids=BAD_REVIEWS.keys())
async def test_a_body_that_cannot_be_a_review_is_a_400(service, case):
    body, want_message = case
    server = service._webhook_server(webhooks.make_app(service, service.body_limit))
    context = ssl.create_default_context(cafile=service.webhook_certfile)
    url = f"https://127.0.0.1:{service.webhook_port}{service.prefix}webhooks/pods/east"
    try:
        answer = await tornado.httpclient.AsyncHTTPClient().fetch(
            url, method="POST", body=body, ssl_options=context, raise_error=False
        )
    finally:
        server.stop()
    assert answer.code == 400
    assert want_message in json.loads(answer.body)["message"]
