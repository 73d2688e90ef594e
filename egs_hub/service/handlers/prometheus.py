"""Prometheus scrapes of the service's metrics.

Vocabulary: a *scrape* is Prometheus's GET of ``<service prefix>metrics``; the
*exposition* is the text it reads (service/exporter.py). With
``authenticate_prometheus`` (the default) the scraper must be a hub user or
service holding the admin scope ``custom:egs:admin`` and send its hub API token
(``Authorization: Bearer <token>``, what Prometheus's ``authorization`` scrape
setting sends); without it anyone who reaches the service may scrape.
"""

from __future__ import annotations

from ...roles import ADMIN_SCOPE
from .base import APIHandler, needs_scope


class MetricsHandler(APIHandler):
    def get(self) -> None:
        if self.egs.authenticate_prometheus:
            self._scrape_as_admin()
        else:
            self._scrape()

    @needs_scope(ADMIN_SCOPE)
    def _scrape_as_admin(self) -> None:
        self._scrape()

    def _scrape(self) -> None:
        body, content_type = self.egs.exporter.exposition()
        # Replaces the JSON content type of the base handler; errors are still JSON (write_error).
        self.set_header("Content-Type", content_type)
        self.finish(body)
