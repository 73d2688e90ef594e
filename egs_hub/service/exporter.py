"""The service's Prometheus metrics, in base units (seconds, bytes, hertz).

Vocabulary: a *scrape* is one read of the metrics by Prometheus; the *exposition*
is the text it reads. *Observed* metrics are histograms and counters the service
feeds as things happen (a planner pass, a GPR's window starting); *state* metrics
are read from the store at scrape time, in one read transaction, together with
the newest *sample* of every GPU (core/samples.py). A GPU's *state* is one of
``unhealthy`` (the backend says it fails), ``bound`` (to a slice), ``unschedulable``
(its node takes no new windows) and ``free``, first match wins. The *estimate
error* of a GPR is its actual start minus the first estimated start it was given.

=================================  =========  ========================================
metric                             type       labels
=================================  =========  ========================================
egs_planner_pass_seconds           histogram
egs_gpr_wait_seconds               histogram
egs_estimate_error_seconds         histogram  (absolute error)
egs_estimates_total                counter    outcome: early, on_time, late
egs_gprs                           gauge      status (not final), slice
egs_gprs_finished_total            counter    status (final), slice
egs_queue_length                   gauge
egs_gpus                           gauge      cluster, shape, state
egs_gpu_*  (GPU_READINGS)          gauge      uuid, node, cluster, slice, gpr
=================================  =========  ========================================
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from ..core import promises
from ..core.model import FINAL_STATUSES, Shape, Status
from ..core.samples import GpuSample
from ..store.models import GPU, Binding, Cluster, GPRRow, Node, Slice

# A GPR that starts within this many seconds of its first estimate started on time.
ON_TIME_SECONDS = 60.0

PASS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
# From a few seconds to a week: GPRs wait for minutes to days.
WAIT_BUCKETS = (5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 604800)
ERROR_BUCKETS = (ON_TIME_SECONDS / 2, ON_TIME_SECONDS, 120, 300, 600, 1800, 3600, 7200, 14400, 43200, 86400)

OPEN_STATUSES = tuple(s for s in Status if not s.is_final)
GPU_STATES = ("bound", "free", "unschedulable", "unhealthy")
GPU_LABELS = ("uuid", "node", "cluster", "slice", "gpr")
MIB = 2**20

# metric, help, GpuSample attribute, factor to the base unit
GPU_READINGS = (
    ("egs_gpu_utilization_percent", "SM (compute) busy percentage of the GPU, 0-100.", "utilization", 1),
    ("egs_gpu_memory_used_bytes", "GPU memory in use.", "memory_used_mib", MIB),
    ("egs_gpu_memory_total_bytes", "Total GPU memory.", "memory_total_mib", MIB),
    ("egs_gpu_temperature_celsius", "GPU temperature.", "temperature_c", 1),
    ("egs_gpu_power_watts", "GPU power draw.", "power_w", 1),
    ("egs_gpu_power_limit_watts", "GPU power limit.", "power_limit_w", 1),
    ("egs_gpu_sm_clock_hertz", "GPU SM clock.", "sm_clock_mhz", 1_000_000),
)


def gpu_state(healthy: bool, schedulable: bool, bound: bool) -> str:
    """unhealthy, bound, unschedulable, free: the first that holds."""
    if not healthy:
        return "unhealthy"
    if bound:
        return "bound"
    return "free" if schedulable else "unschedulable"


def estimate_outcome(error_seconds: float) -> str:
    """early, on_time or late, for a start ``error_seconds`` after its first estimate."""
    if error_seconds < -ON_TIME_SECONDS:
        return "early"
    return "late" if error_seconds > ON_TIME_SECONDS else "on_time"


class StateCollector:
    """Reads GPRs, GPUs and the newest samples at every scrape."""

    def __init__(self, sessions: sessionmaker[Session], latest: Callable[[], Iterable[GpuSample]]):
        self.sessions = sessions
        self.latest = latest

    def collect(self) -> Iterator[Metric]:
        with self.sessions() as session, session.begin():
            counts = session.execute(
                select(GPRRow.status, GPRRow.slice, func.count()).group_by(GPRRow.status, GPRRow.slice)
            ).all()
            slices = set(session.scalars(select(Slice.name)))
            gpus = session.execute(
                select(
                    GPU.uuid,
                    GPU.healthy,
                    GPU.present,
                    Node.name,
                    Node.gpu_model,
                    Node.gpu_memory_gb,
                    Node.gpus_per_node,
                    Node.mig_profile,
                    Node.replicas,
                    Node.schedulable,
                    Cluster.name,
                    Binding.slice,
                    Binding.gpr_id,
                )
                .join(Node, GPU.node_id == Node.id)
                .join(Cluster, Node.cluster_id == Cluster.id)
                .outerjoin(Binding, Binding.gpu_uuid == GPU.uuid)
            ).all()
        yield from self._gprs(counts, slices)
        yield from self._gpus(gpus)

    def _gprs(self, counts: list[tuple[str, str, int]], slices: set[str]) -> Iterator[Metric]:
        open_counts = {(status, name): n for status, name, n in counts if Status(status) not in FINAL_STATUSES}
        gprs = GaugeMetricFamily(
            "egs_gprs",
            "GPRs by status that is not final (pending-approval ... releasing) and slice; 0 for every known slice.",
            labels=("status", "slice"),
        )
        for name in sorted(slices | {name for _, name in open_counts}):
            for status in OPEN_STATUSES:
                gprs.add_metric((status.value, name), open_counts.get((status.value, name), 0))
        yield gprs
        finished = CounterMetricFamily(
            "egs_gprs_finished_total",
            "GPRs that ended, by final status (complete, rejected, cancelled, failed) and slice.",
            labels=("status", "slice"),
        )
        for status, name, n in sorted(counts):
            if Status(status) in FINAL_STATUSES:
                finished.add_metric((status, name), n)
        yield finished
        queued = sum(n for (status, _), n in open_counts.items() if status == Status.QUEUED)
        yield GaugeMetricFamily("egs_queue_length", "GPRs queued for GPUs.", value=queued)

    def _gpus(self, rows: list[tuple]) -> Iterator[Metric]:
        states: dict[tuple[str, str], Tally] = {}
        labels_of: dict[str, tuple[str, ...]] = {}
        for uuid, healthy, present, node, *shape, schedulable, cluster, slice_name, gpr in rows:
            labels_of[uuid] = (uuid, node, cluster, slice_name or "", "" if gpr is None else str(gpr))
            if present:
                tally = states.setdefault((cluster, Shape(*shape).name), Tally())
                tally[gpu_state(healthy, schedulable, slice_name is not None)] += 1
        family = GaugeMetricFamily(
            "egs_gpus",
            "GPUs present, by cluster, shape (e.g. 'H100-80GB x8') and state: unhealthy (failing, bound or not), "
            "bound (to a slice), unschedulable (unbound on a node that takes no new windows) or free.",
            labels=("cluster", "shape", "state"),
        )
        for (cluster, shape), tally in sorted(states.items()):
            for state in GPU_STATES:
                family.add_metric((cluster, shape, state), tally[state])
        yield family
        yield from self._readings(labels_of)

    def _readings(self, labels_of: dict[str, tuple[str, ...]]) -> Iterator[Metric]:
        samples = sorted(self.latest(), key=lambda s: s.uuid)
        for name, help_text, attribute, factor in GPU_READINGS:
            family = GaugeMetricFamily(
                name,
                help_text + " Newest sample; slice and gpr are empty while the GPU is not bound.",
                labels=GPU_LABELS,
            )
            for sample in samples:
                reading = getattr(sample, attribute)
                if reading is not None:
                    labels = labels_of.get(sample.uuid, (sample.uuid, sample.node or "", "", "", ""))
                    family.add_metric(labels, reading * factor)
            yield family


class Exporter:
    """The service's metrics in a registry of their own; ``exposition()`` is what /metrics serves."""

    def __init__(self, sessions: sessionmaker[Session], latest: Callable[[], Iterable[GpuSample]]):
        self.registry = CollectorRegistry()
        self.pass_seconds = Histogram(
            "egs_planner_pass_seconds",
            "Duration of one reconcile pass of the planner.",
            buckets=PASS_BUCKETS,
            registry=self.registry,
        )
        self.wait_seconds = Histogram(
            "egs_gpr_wait_seconds",
            "Time from a GPR's submission to the start of its window.",
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self.estimate_error_seconds = Histogram(
            "egs_estimate_error_seconds",
            "Absolute difference between a GPR's actual start and the first estimated start it was given; "
            "egs_estimates_total says whether it was early or late.",
            buckets=ERROR_BUCKETS,
            registry=self.registry,
        )
        self.estimates = Counter(
            "egs_estimates_total",
            f"GPRs started that had an estimated start, by outcome: on_time within {ON_TIME_SECONDS:.0f} s "
            "of the first estimate, else early or late.",
            ("outcome",),
            registry=self.registry,
        )
        for outcome in ("early", "on_time", "late"):
            self.estimates.labels(outcome)
        self.estimates_moved = Counter(
            "egs_estimates_moved_total",
            "Queued GPRs whose estimated start moved more than 60 s past the start they were told "
            "(an estimate-moved event), by the planner's cause.",
            ("cause",),
            registry=self.registry,
        )
        for cause in promises.CAUSES:
            self.estimates_moved.labels(cause)
        self.registry.register(StateCollector(sessions, latest))

    def observe_pass(self, seconds: float) -> None:
        self.pass_seconds.observe(seconds)

    def observe_start(self, wait_seconds: float, estimate_error_seconds: float | None) -> None:
        """A GPR's window started ``wait_seconds`` after submission; the error is None without an estimate."""
        self.wait_seconds.observe(wait_seconds)
        if estimate_error_seconds is not None:
            self.estimate_error_seconds.observe(abs(estimate_error_seconds))
            self.estimates.labels(estimate_outcome(estimate_error_seconds)).inc()

    def observe_moved(self, cause: str) -> None:
        """A queued GPR's estimate moved past the start it was told, for ``cause``."""
        self.estimates_moved.labels(cause).inc()

    def exposition(self) -> tuple[bytes, str]:
        """The text format body and its content type; reads the store."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
