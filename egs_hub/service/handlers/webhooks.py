"""The pod admission webhook: POST <prefix>webhooks/pods/<cluster>, called by a cluster's API server.

Vocabulary as in backends/kubernetes/webhook.py, which answers. The caller is
the API server, not a hub user: there is no hub auth (the listener's TLS, and
the webhook answering only with patches that put GPU pods on their own slice's
nodes, are what keep it safe). A namespace belongs to a slice when the store
says so for that cluster: the same namespace name can be another slice's on
another cluster, so each cluster's MutatingWebhookConfiguration names its own
path (the chart's ``egs.cluster.name``).

| request                                              | answer                                         |
|------------------------------------------------------|------------------------------------------------|
| an AdmissionReview v1                                | 200, the AdmissionReview with its response     |
| not UTF-8 JSON, nested over 64 deep, not a review v1 | 400 ``{"status", "message"}``                  |
| a cluster that is not registered                     | 404 (the API server then admits the pod as is) |

A GPU pod in a namespace of a slice whose policy names an ``auto_gpr`` template gets a GPR filed for
it (or waits for the one the slice has waiting) once the answer is sent, so a slow plan never delays
the pod's admission (service/auto_gpr.py); an Event on the pod's namespace says which GPR, or why
none could be filed.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from tornado import web
from tornado.httpserver import HTTPServer

from ...backends.kubernetes.webhook import InvalidReview, gpu_count, pod_name, review_pod
from ...core.decoding import decode_json
from ...core.errors import InvalidRequest
from ...store import queries
from ..body_limits import UNBOUNDED, BoundedApplication, Limit
from ..tls_files import CertificateFiles

ROUTE = r"webhooks/pods/([^/]+)"
# A pod's AdmissionReview nests about 15 deep (managedFields, affinity); the API's bodies stay within 32.
REVIEW_MAX_DEPTH = 64
# An AdmissionReview holds the pod twice (object, oldObject); the API server takes requests of up to 3 MiB.
# A review the webhook refused would refuse the pod (failurePolicy Fail), so it takes more.
REVIEW_MAX_BYTES = 8 * 1024 * 1024
# Auto-GPRs being filed for admitted pods; held here so that the loop does not drop them (weak references).
_filing: set[asyncio.Task] = set()


class PodWebhookHandler(web.RequestHandler):
    @property
    def egs(self):
        return self.settings["egs"]

    def set_default_headers(self) -> None:
        self.set_header("Content-Type", "application/json; charset=UTF-8")
        self.set_header("Cache-Control", "no-store")

    async def post(self, cluster: str) -> None:
        if cluster not in self.egs.registry.states:
            raise web.HTTPError(404, f"no cluster named {cluster!r}; the webhook path ends with a registered cluster")
        try:
            review = decode_json(self.request.body, max_depth=REVIEW_MAX_DEPTH)
        except InvalidRequest as e:
            raise web.HTTPError(400, f"{e}; send an AdmissionReview v1") from None
        found: list[tuple[str, str | None]] = []  # the namespace's slice and its auto_gpr, once looked up
        try:
            answer = review_pod(review, lambda namespace: self._slice_of(cluster, namespace, found))
        except InvalidReview as e:
            raise web.HTTPError(400, str(e)) from None
        await self.finish(json.dumps(answer))
        if found and found[0][1] is not None and "warnings" not in answer["response"]:
            self._file_for_pod(cluster, found[0][0], review["request"])

    def _slice_of(self, cluster: str, namespace: str, found: list[tuple[str, str | None]]) -> str | None:
        with self.egs.sessions() as session:
            slice_and_template = queries.namespace_slice(session, cluster, namespace)
        if slice_and_template is None:
            return None
        found.append(slice_and_template)
        return slice_and_template[0]

    def _file_for_pod(self, cluster: str, slice_name: str, request: dict) -> None:
        """A GPU pod in a slice whose policy names an auto_gpr template: file or wait for its GPR once the
        pod is admitted (the API server waits for no GPR), in the background."""
        pod = request["object"]
        wanted = gpu_count(pod)
        if not wanted:
            return
        namespace = request.get("namespace") or pod["metadata"]["namespace"]
        task = asyncio.ensure_future(self.egs.auto_gprs.for_pod(cluster, slice_name, namespace, pod_name(pod), wanted))
        _filing.add(task)
        task.add_done_callback(_filing.discard)

    def write_error(self, status_code: int, **kwargs) -> None:
        error = kwargs.get("exc_info", (None, None, None))[1]
        message = error.log_message if isinstance(error, web.HTTPError) and error.log_message else self._reason
        self.finish(json.dumps({"status": status_code, "message": message}))


def make_app(egs, body_limit: Callable[[str], Limit]) -> web.Application:
    """The webhook listener's app: the webhook route only, bodies bounded by ``body_limit``."""
    return BoundedApplication([(egs.prefix + ROUTE, PodWebhookHandler)], egs=egs, body_limit=body_limit)


def listen(app: web.Application, port: int, ip: str, certfile: str, keyfile: str) -> HTTPServer:
    """Serve ``app`` over HTTPS with the certificate and key (PEM files) on ``ip``:``port``; a renewed pair in
    the same files is served from the next handshake on (tls_files.py)."""
    context = CertificateFiles(certfile, keyfile).server_context()
    server = HTTPServer(app, ssl_options=context, max_body_size=UNBOUNDED)
    server.listen(port, ip)
    return server
