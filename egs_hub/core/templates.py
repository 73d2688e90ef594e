"""GPR templates: a named GPR shape that users pick instead of typing one.

Vocabulary: a *template* gives a GPR's ``cluster``, ``shape``, size (``gpus`` or
``nodes``), ``duration``, ``priority``, ``idle_timeout`` and ``preemptible``. Its
*scope* says who may use it: everyone (global), the slices of one project, or one
slice. A GPR that names a template takes the template's value of each of those
fields it does not give itself; giving ``gpus`` or ``nodes`` replaces the template's
size whole. What comes out is checked against the slice's policy like any GPR, so a
member can override a field only within what the policy allows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from .errors import InvalidRequest, PolicyViolation

# The GPR fields a template gives, in the order the API lists them.
TEMPLATE_FIELDS = ("cluster", "shape", "gpus", "nodes", "duration", "priority", "idle_timeout", "preemptible")
SIZE_FIELDS = ("gpus", "nodes")


@dataclass(frozen=True)
class GPRTemplate:
    """A named GPR shape. ``project`` or ``slice`` (at most one) scopes it; neither: global.
    ``priority`` and ``preemptible`` None: the GPR's own default."""

    name: str
    duration: timedelta
    gpus: int | None = None
    nodes: int | None = None
    cluster: str | None = None
    shape: str | None = None
    priority: int | None = None
    idle_timeout: timedelta | None = None
    preemptible: bool | None = None
    description: str = ""
    project: str | None = None
    slice: str | None = None
    created_by: str = ""
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def scope(self) -> str:
        """``global``, ``project NAME`` or ``slice NAME``: who may use it, in words."""
        if self.slice is not None:
            return f"slice {self.slice}"
        if self.project is not None:
            return f"project {self.project}"
        return "global"


def check_template(template: GPRTemplate) -> None:
    """Rules across a template's fields: one scope at most, exactly one of gpus and nodes."""
    if template.project is not None and template.slice is not None:
        raise InvalidRequest("slice", "a template is for a project or for a slice, not both")
    if template.gpus and template.nodes:
        raise InvalidRequest("gpus", "give either gpus or nodes, not both")
    if template.gpus is None and template.nodes is None:
        raise InvalidRequest("gpus", "give gpus (a number of GPUs) or nodes (whole nodes)")


def usable_in(template: GPRTemplate, slice_name: str, project: str | None) -> bool:
    """Whether GPRs of slice ``slice_name`` (of ``project``) may use ``template``."""
    if template.slice is not None:
        return template.slice == slice_name
    return template.project is None or template.project == project


def not_usable(name: str, slice_name: str) -> PolicyViolation:
    """A template that does not exist and one that slice ``slice_name`` may not use are answered alike:
    which slice or project another template is for is not the caller's to learn (issue 45)."""
    return PolicyViolation(
        "template",
        f"no template named {name!r} that slice {slice_name!r} may use; GET /templates?slice={slice_name} lists them",
    )


def check_usable(template: GPRTemplate, slice_name: str, project: str | None) -> None:
    if not usable_in(template, slice_name, project):
        raise not_usable(template.name, slice_name)


def fill(template: GPRTemplate, given: Mapping[str, Any]) -> dict[str, Any]:
    """The GPR fields ``given`` (by the request) completed from ``template``: each template field
    the request did not give takes the template's value (None left out, so the GPR's default
    holds). The size comes whole from one side: the request's when it gives ``gpus`` or
    ``nodes`` (not null), else the template's."""
    fields = dict(given)
    sized = any(fields.get(name) is not None for name in SIZE_FIELDS)
    if not sized:
        for name in SIZE_FIELDS:
            fields.pop(name, None)
    for name in TEMPLATE_FIELDS:
        if name in fields or (sized and name in SIZE_FIELDS):
            continue
        value = getattr(template, name)
        if value is not None:
            fields[name] = value
    return fields
