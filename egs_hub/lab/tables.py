"""Answers of the EGS service as tables for notebooks (HTML) and terminals (plain text).

Vocabulary: a ``Table`` is a title, column names, rows of text and a note, with
the models it shows in ``items``; the ``*_table`` functions build one from the
client's models (pure: ``now`` is a parameter). Times show in local time, spans
compactly ("1h5m", "now").
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from ..client import GPR, Endpoint, GPUs, Template, WaitTimes
from ..core.units import format_duration

WAITING = ("pending-approval", "queued")
LIVE = ("pending-approval", "queued", "provisioning", "provisioned", "releasing")


@dataclass(frozen=True)
class Table:
    title: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    note: str = ""
    items: tuple[Any, ...] = ()

    def text(self) -> str:
        widths = [max([len(c), *(len(r[i]) for r in self.rows)]) for i, c in enumerate(self.columns)]
        lines = [self.title] if self.title else []
        if self.rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(self.columns, widths, strict=True)).rstrip())
            lines.extend("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in self.rows)
        if self.note:
            lines.append(self.note)
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        parts = [f"<p><strong>{html.escape(self.title)}</strong></p>"] if self.title else []
        if self.rows:
            head = "".join(f"<th style='text-align:left'>{html.escape(c)}</th>" for c in self.columns)
            body = "".join(
                "<tr>" + "".join(f"<td style='text-align:left'>{html.escape(v)}</td>" for v in row) + "</tr>"
                for row in self.rows
            )
            parts.append(f"<table class='egs-table'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        if self.note:
            parts.append(f"<p>{html.escape(self.note)}</p>")
        return "".join(parts)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.text())

    def __str__(self) -> str:
        return self.text()


def format_span(span: timedelta) -> str:
    """A wait or time left: "now", "45s", or whole minutes and up ("1h5m")."""
    seconds = int(span.total_seconds())
    if seconds <= 0:
        return "now"
    if seconds < 60:
        return f"{seconds}s"
    return format_duration(timedelta(minutes=round(seconds / 60)))


def format_local(when: datetime, now: datetime) -> str:
    """``when`` in ``now``'s zone: the time of day today, else the date too."""
    local = when.astimezone(now.tzinfo)
    return local.strftime("%H:%M") if local.date() == now.date() else local.strftime("%a %b %d %H:%M")


def describe_ask(gpr: GPR) -> str:
    """What a GPR asked for: "2 GPUs H100 for 2h"."""
    count = f"{gpr.gpus} GPU{'s' * (gpr.gpus != 1)}" if gpr.gpus else f"{gpr.nodes} node{'s' * (gpr.nodes != 1)}"
    shape = f" {gpr.shape}" if gpr.shape else ""
    return f"{count}{shape} for {format_duration(gpr.duration)}"


def describe_state(gpr: GPR, now: datetime) -> str:
    """Where the GPR is: "queued #3, starts ~14:20 (in 1h5m)", "1h12m left (until 15:40)", ..."""
    if gpr.status == "queued" and gpr.estimated_start is not None:
        when = format_local(gpr.estimated_start, now)
        return f"queued #{gpr.queue_position}, starts ~{when} (in {format_span(gpr.estimated_start - now)})"
    if gpr.status == "provisioned" and gpr.window_end is not None:
        return f"{format_span(gpr.window_end - now)} left (until {format_local(gpr.window_end, now)})"
    if gpr.status == "complete" and gpr.end_reason:
        return f"complete ({gpr.end_reason})"
    if gpr.status_reason:
        return f"{gpr.status}: {gpr.status_reason}"
    return gpr.status


def gpr_row(gpr: GPR, now: datetime) -> tuple[str, ...]:
    holds = f"{len(gpr.bound_gpus)} on {', '.join(gpr.bound_nodes)}" if gpr.bound_gpus else ""
    state = describe_state(gpr, now)
    return (str(gpr.id), gpr.slice, gpr.requested_by or "", describe_ask(gpr), str(gpr.priority), state, holds)


GPR_COLUMNS = ("ID", "slice", "by", "asks", "priority", "state", "GPUs held")


def gpr_table(gprs: Sequence[GPR], now: datetime, title: str, note: str = "") -> Table:
    return Table(title, GPR_COLUMNS, tuple(gpr_row(g, now) for g in gprs), note, tuple(gprs))


def format_money(value: float | None) -> str:
    return "no price" if value is None else f"{value:,.2f}"


def wait_times_table(answer: WaitTimes, now: datetime, title: str) -> Table:
    rows = tuple(
        (
            o.cluster,
            o.shape.name,
            str(o.gpus),
            format_local(o.estimated_start, now),
            format_span(o.wait),
            format_money(o.cost_per_hour),
            format_money(o.estimated_cost),
        )
        for o in answer.options
    )
    notes = []
    if not answer.options:
        notes.append("No shape or cluster can serve this now.")
    if answer.needs_approval:
        notes.append("Needs an admin's approval: " + "; ".join(answer.needs_approval) + ".")
    columns = ("cluster", "shape", "GPUs", "estimated start", "wait", "cost/hr", "total estimated cost")
    return Table(title, columns, rows, " ".join(notes), answer.options)


def templates_table(templates: Sequence[Template], title: str) -> Table:
    rows = tuple(
        (
            t.name,
            f"{t.gpus} GPU{'s' if t.gpus != 1 else ''}" if t.gpus else f"{t.nodes} node{'s' if t.nodes != 1 else ''}",
            format_span(t.duration),
            t.shape or "any",
            t.cluster or "any",
            t.scope,
            t.description,
        )
        for t in templates
    )
    note = (
        f"Ask from one with %egs request --template {templates[0].name}"
        if templates
        else "No GPR template for this slice; an admin adds them (POST /templates)."
    )
    return Table(
        title, ("name", "size", "for", "shape", "cluster", "for whom", "description"), rows, note, tuple(templates)
    )


def _reading(value: float | None, unit: str, digits: int = 0) -> str:
    return "" if value is None else f"{value:.{digits}f}{unit}"


def gpus_table(answer: GPUs, title: str) -> Table:
    """Every GPU of the answer with its latest readings; a note says when there is no metric source."""
    rows = []
    for gpu in answer.gpus:
        sample = gpu.sample
        memory = ""
        if sample is not None and sample.memory_used_mib is not None and sample.memory_total_mib:
            memory = f"{sample.memory_used_mib / 1024:.1f} / {sample.memory_total_mib / 1024:.0f} GiB"
        rows.append(
            (
                f"{gpu.node}:{gpu.index}",
                gpu.model,
                f"{gpu.slice} (GPR {gpu.gpr})" if gpu.slice else "free",
                _reading(sample and sample.utilization, " %"),
                memory,
                _reading(sample and sample.temperature_c, " °C"),
                _reading(sample and sample.power_w, " W"),
            )
        )
    if answer.source.error:
        note = f"No GPU metrics: {answer.source.error}"
    elif not answer.gpus:
        note = "No GPUs are bound to your slices now."
    else:
        note = ""
    columns = ("GPU", "model", "held by", "utilisation", "memory", "temperature", "power")
    return Table(title, columns, tuple(rows), note, answer.gpus)


def _seconds(value: float | None) -> str:
    return "" if value is None else f"{value * 1000:.0f} ms" if value < 1 else f"{value:.1f} s"


def describe_endpoint(endpoint: Endpoint, now: datetime) -> str:
    """Its status, with when its waiting replica is estimated to start, or why it failed."""
    if endpoint.status == "failed" and endpoint.message:
        return f"failed: {endpoint.message.splitlines()[0]}"
    starts = [r.estimated_start for r in endpoint.replica_states if r.estimated_start is not None]
    if endpoint.status == "pending" and starts:
        return f"pending: GPUs ~{format_local(min(starts), now)} (in {format_span(min(starts) - now)})"
    return endpoint.status


def endpoints_table(endpoints: Sequence[Endpoint], now: datetime, title: str, note: str = "") -> Table:
    rows = tuple(
        (
            e.name,
            e.slice,
            describe_endpoint(e, now),
            f"{e.replicas}/{e.wanted_replicas} (max {e.max_replicas})",
            f"{e.requests_per_second:.2f}",
            _seconds(e.latency_p50),
            _seconds(e.latency_p95),
            str(e.errors),
            e.url,
        )
        for e in endpoints
    )
    if not endpoints and not note:
        note = "No endpoint in your slices; serve a model with %egs serve MODEL."
    columns = ("name", "slice", "status", "ready/wanted", "req/s", "p50", "p95", "errors (1 min)", "URL at the hub")
    return Table(title, columns, rows, note, tuple(endpoints))
