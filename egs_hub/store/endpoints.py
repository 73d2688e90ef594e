"""Endpoints in the store: the ``endpoints`` row and its spec, and the GPRs of its replicas."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from ..core import model as core
from ..core.endpoints import EndpointSpec, Hold
from .models import EndpointReplicaRow, EndpointRow, GPRRow
from .queries import to_gpr

_SECONDS = ("idle_timeout", "duration")
_LISTS = ("command", "args")


def spec_json(spec: EndpointSpec) -> dict:
    """What the ``spec`` column holds: the spec's fields but slice, name and runtime (columns of
    their own), durations in seconds."""
    data = {name: getattr(spec, name) for name in EndpointSpec.__dataclass_fields__}
    for name in ("slice", "name", "runtime"):
        del data[name]
    for name in _SECONDS:
        data[name] = int(data[name].total_seconds())
    for name in _LISTS:
        data[name] = list(data[name])
    data["env"] = dict(data["env"])
    return data


def to_spec(row: EndpointRow) -> EndpointSpec:
    data = dict(row.spec)
    for name in _SECONDS:
        data[name] = timedelta(seconds=data[name])
    for name in _LISTS:
        data[name] = tuple(data[name])
    return EndpointSpec(slice=row.slice, name=row.name, runtime=row.runtime, **data)


def write_spec(row: EndpointRow, spec: EndpointSpec) -> None:
    row.spec = spec_json(spec)


def hold_of(row: EndpointRow) -> Hold | None:
    if row.hold_replicas is None or row.hold_until is None:
        return None
    return Hold(row.hold_replicas, row.hold_until)


def get(session: Session, slice_name: str, name: str, *, lock: bool = False) -> EndpointRow | None:
    query = select(EndpointRow).where(EndpointRow.slice == slice_name, EndpointRow.name == name)
    return session.scalars(query.with_for_update() if lock else query).one_or_none()


def rows(session: Session, slices: Iterable[str] | None = None) -> list[EndpointRow]:
    """Endpoints by slice and name; of ``slices`` only when given."""
    query = select(EndpointRow).order_by(EndpointRow.slice, EndpointRow.name)
    if slices is not None:
        query = query.where(EndpointRow.slice.in_(list(slices)))
    return list(session.scalars(query))


def slice_endpoints(session: Session, slice_name: str) -> list[str]:
    return list(session.scalars(select(EndpointRow.name).where(EndpointRow.slice == slice_name)))


def add_replica(session: Session, endpoint_id: int, gpr_id: int, renews: int | None = None) -> None:
    session.add(EndpointReplicaRow(gpr_id=gpr_id, endpoint_id=endpoint_id, renews=renews))


def replica_gprs(session: Session, endpoint_ids: Iterable[int], *, live: bool = True) -> dict[int, list[core.GPR]]:
    """The GPRs of each endpoint's replicas, oldest first; only those not finished when ``live``."""
    query = (
        select(EndpointReplicaRow.endpoint_id, GPRRow)
        .join(GPRRow, GPRRow.id == EndpointReplicaRow.gpr_id)
        .where(EndpointReplicaRow.endpoint_id.in_(list(endpoint_ids)))
        .order_by(GPRRow.id)
    )
    if live:
        query = query.where(GPRRow.status.notin_([s.value for s in core.FINAL_STATUSES]))
    found: dict[int, list[core.GPR]] = {}
    for endpoint_id, gpr_row in session.execute(query):
        found.setdefault(endpoint_id, []).append(to_gpr(gpr_row))
    return found
