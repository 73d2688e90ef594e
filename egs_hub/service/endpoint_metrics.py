"""Inference endpoints' Prometheus metrics, read from the endpoint pass and the proxy's traffic (in
memory) at each scrape; labels ``slice`` and ``endpoint``.

=================================  =========  ===============================================
metric                             type       meaning
=================================  =========  ===============================================
egs_endpoint_requests_total        counter    requests answered at its proxy path
egs_endpoint_errors_total          counter    of them, 5xx or no answer
egs_endpoint_in_flight             gauge      requests in flight now
egs_endpoint_replicas              gauge      replicas by ``state``: ready, wanted
egs_endpoint_latency_seconds       gauge      ``quantile`` 0.5, 0.95 over the last minute
=================================  =========  ===============================================
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

LABELS = ("slice", "endpoint")


class EndpointCollector:
    def __init__(self, endpoints):
        self.endpoints = endpoints  # service/endpoints.Endpoints

    def collect(self) -> Iterator[Metric]:
        endpoints = self.endpoints
        now = endpoints.clock()
        requests = CounterMetricFamily(
            "egs_endpoint_requests", "Requests answered at an endpoint's proxy path.", labels=LABELS
        )
        errors = CounterMetricFamily(
            "egs_endpoint_errors", "Requests at an endpoint answered 5xx, or not answered.", labels=LABELS
        )
        in_flight = GaugeMetricFamily("egs_endpoint_in_flight", "Requests in flight at an endpoint.", labels=LABELS)
        replicas = GaugeMetricFamily(
            "egs_endpoint_replicas", "An endpoint's replicas: ready, and wanted.", labels=(*LABELS, "state")
        )
        latency = GaugeMetricFamily(
            "egs_endpoint_latency_seconds",
            "Latency of an endpoint's requests over the last minute, by quantile.",
            labels=(*LABELS, "quantile"),
        )
        for (slice_name, name), known in sorted(endpoints.known.items()):
            labels = [slice_name, name]
            figures = endpoints.traffic.figures(known.id, now)
            requests.add_metric(labels, figures.requests_total)
            errors.add_metric(labels, figures.errors_total)
            in_flight.add_metric(labels, figures.in_flight)
            replicas.add_metric([*labels, "ready"], endpoints.ready_count(known.id))
            replicas.add_metric([*labels, "wanted"], endpoints.wanted.get(known.id, 0))
            for quantile, value in (("0.5", figures.latency_p50), ("0.95", figures.latency_p95)):
                if value is not None:
                    latency.add_metric([*labels, quantile], value)
        yield from (requests, errors, in_flight, replicas, latency)
