"""GET /usage: GPU-hours reserved and used, their cost and the bound GPUs' mean utilisation, per
project, slice or user and per week or month (core/usage.py), as JSON or as CSV for chargeback.

Admins see everything; a member sees the GPRs of their own slices. What it reads grows with
the GPRs that held GPUs in the periods asked for, not with the store.
"""

from __future__ import annotations

import csv
import io

from ...core.resources import UsageReport
from ...core.resources import UsageRow as UsageRowResource
from ...core.usage import UsageRow, period_start, usage_rows
from ...store import queries
from ..parameters import UsageQuery, read
from .base import APIHandler, operation

CSV_COLUMNS = tuple(UsageRowResource.model_fields)


class UsageHandler(APIHandler):
    @operation(
        "GET /usage",
        "GPU-hours reserved and used, cost and mean utilisation per project, slice or user, per week or month "
        "(admins: all; members: their slices'); format=csv for chargeback",
        ok="the usage (as CSV with format=csv: a header, then one line per row)",
        answer=UsageReport,
        errors=(401,),
        query=UsageQuery,
        csv=True,
    )
    def get(self) -> None:
        query = read(UsageQuery, self)
        now = self.now()
        since = period_start(min(query.since or now, now), query.period)
        with self.egs.sessions() as session:
            seen = self.viewer.slices
            slices = None if seen is None else sorted(seen)
            gprs = queries.gprs_held_between(session, since, now, slices)
            projects = queries.slice_projects(session) if query.group_by == "project" else {}
            readings = queries.readings(session, [g.id for g in gprs], since, now)
        key_of = {
            "project": lambda g: projects.get(g.spec.slice, "unknown"),
            "slice": lambda g: g.spec.slice,
            "user": lambda g: g.requested_by,
        }[query.group_by]
        rows = usage_rows(gprs, key_of, readings, since, now, query.period)
        if query.format == "csv":
            self.write_csv(rows, f"egs-usage-{query.group_by}-{query.period}-{since:%Y-%m-%d}.csv")
            return
        self.write_json(
            UsageReport(
                group_by=query.group_by,
                period=query.period,
                since=since,
                until=now,
                rows=[UsageRowResource(**vars(row)) for row in rows],
            )
        )

    def write_csv(self, rows: list[UsageRow], filename: str) -> None:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            values = UsageRowResource(**vars(row)).model_dump(mode="json")
            values["period_start"] = f"{row.period_start:%Y-%m-%d}"
            writer.writerow(round(v, 6) if isinstance(v, float) else v for v in map(values.get, CSV_COLUMNS))
        self.set_header("Content-Type", "text/csv; charset=UTF-8")
        self.set_header("Content-Disposition", f'attachment; filename="{filename}"')
        self.finish(out.getvalue())
