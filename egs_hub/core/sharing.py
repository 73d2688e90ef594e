"""Parts of a GPU: MIG instances and time-sliced shares (issue 23).

Vocabulary: a *MIG profile* names an instance of a partitioned GPU as NVIDIA does,
``<compute slices>g.<memory>gb`` (``1g.10gb``, ``3g.40gb``; ``+me`` adds the media
engines); a *layout* is the instances each GPU of a node is split into
(``{"1g.10gb": 7}``); a *unit* is what the planner hands out: a whole GPU, or one
instance. Every unit of a node has the same shape (model.Shape, with the profile),
so a node whose GPUs are split into several profiles is planned as one node per
profile, named ``<node>:<profile>`` (``unit_node_name``): the planner never mixes
a whole-GPU request with the instances of a GPU, and needs no other rule for it.

A *time-sliced* GPU (``time_slicing: 4``) is shared by up to that many GPRs at once, each holding one
*share* (a unit too, ``<GPU UUID>::<k>``; its server sees the GPU itself). Shares have no memory or
fault isolation: only slices whose policy allows ``gpu_sharing`` ask for them (``gpu_share``), and
their shapes are named ``H100-80GB shared/4``.

GPU-equivalents: an instance counts as its compute slices over the GPU's (7 on
A100, H100, H200, B200; 4 on A30), so a ``1g.10gb`` is 1/7 of a GPU and a
``3g.40gb`` 3/7, a share as its part of the GPU (1/4). Quotas, fair share and GPU-hours count GPU-equivalents; the
planner counts them in whole ``PARTS`` of a GPU so that its sums stay exact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .model import Node

PARTS = 2520  # parts of a GPU: divisible by 1-10, so every instance and share is a whole number of parts
REPLICAS = tuple(n for n in range(2, 49) if PARTS % n == 0)  # what a GPU may be time-sliced into
MIG_PROFILE = re.compile(r"(?P<slices>[1-7])g\.(?P<memory>[1-9][0-9]{0,3})gb(?P<media>\+me)?")
_SLICES_BY_MODEL = {"A30": 4}  # compute slices of a whole GPU, where not 7
FULL_SLICES = 7


class LayoutError(ValueError):
    """A MIG layout that a GPU cannot take; the message says why."""


def gpu_slices(model: str) -> int:
    """Compute slices of a whole GPU of ``model`` (7, or 4 on an A30)."""
    return _SLICES_BY_MODEL.get(model.upper(), FULL_SLICES)


def profile_slices(profile: str) -> int:
    """The compute slices of a MIG profile; ValueError when ``profile`` is not one."""
    return int(_parsed(profile)["slices"])


def profile_memory_gb(profile: str) -> int:
    """The memory of a MIG profile's instance; ValueError when ``profile`` is not one."""
    return int(_parsed(profile)["memory"])


def _parsed(profile: str) -> re.Match:
    found = MIG_PROFILE.fullmatch(profile)
    if found is None:
        raise ValueError(f'{profile!r} is not a MIG profile like "1g.10gb" or "3g.40gb"')
    return found


def equivalents(model: str, profile: str | None, replicas: int = 1) -> Fraction:
    """GPU-equivalents of one unit: 1 for a whole GPU, an instance's slices over the GPU's, one share
    of a GPU time-sliced into ``replicas``."""
    if profile is not None:
        return Fraction(profile_slices(profile), gpu_slices(model))
    return Fraction(1, replicas)


def check_replicas(replicas: object) -> int:
    """The shares a GPU is time-sliced into; LayoutError unless one of REPLICAS."""
    if isinstance(replicas, bool) or replicas not in REPLICAS:
        allowed = ", ".join(map(str, REPLICAS))
        raise LayoutError(f"time_slicing must be a number of shares, one of {allowed}; not {replicas!r}")
    return replicas


def requested_profile(shape: str | None) -> str | None:
    """The MIG profile a GPR's ``shape`` names after its GPU type (``"H100-80GB 1g.10gb"``, or the
    shape's name ``"H100-80GB 1g.10gb x14"``: ``1g.10gb``); None: whole GPUs."""
    words = (shape or "").lower().split()
    return next((w for w in words[1:] if MIG_PROFILE.fullmatch(w)), None)


def check_layout(model: str, memory_gb: int, layout: Mapping[str, int]) -> None:
    """Raise LayoutError unless one GPU of ``model`` with ``memory_gb`` can hold ``layout``
    (profile -> instances per GPU): its compute slices and memory add up to no more than
    the GPU's, and every profile fits the GPU's memory."""
    if not layout:
        raise LayoutError("a MIG layout names at least one profile")
    slices = memory = 0
    for profile, count in layout.items():
        if not isinstance(profile, str):
            raise LayoutError(f'{profile!r} is not a MIG profile like "1g.10gb" or "3g.40gb"')
        try:
            each = profile_slices(profile), profile_memory_gb(profile)
        except ValueError as e:
            raise LayoutError(str(e)) from None
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise LayoutError(f"the number of {profile} instances must be a whole number from 1, not {count!r}")
        slices += each[0] * count
        memory += each[1] * count
    whole = gpu_slices(model)
    if slices > whole:
        raise LayoutError(f"the instances take {slices} compute slices; a {model} GPU has {whole}")
    if memory > memory_gb:
        raise LayoutError(f"the instances take {memory} GB; a {model} GPU has {memory_gb} GB")


def unit_node_name(node: str, profile: str) -> str:
    """The name the planner knows a node's instances of ``profile`` by."""
    return f"{node}:{profile}"


def host_of(node: str) -> str:
    """The machine a planning node is on (``gpu-a:1g.10gb`` is on ``gpu-a``; a node name has no colon)."""
    return node.split(":", 1)[0]


def unit_kind(node: str) -> str | None:
    """What a planning node's units are: the MIG profile of ``gpu-a:1g.10gb``, ``shared`` for
    ``gpu-a:shared`` (time-sliced shares); None for a node of whole GPUs."""
    return node.partition(":")[2] or None


def fractions(nodes: Iterable[Node]) -> dict[str, float]:
    """GPU-equivalents of each unit of ``nodes`` that is not a whole GPU, by UUID."""
    return {gpu: float(node.shape.equivalents) for node in nodes if node.shape.equivalents < 1 for gpu in node.gpus}


def replica_uuid(gpu: str, replica: int) -> str:
    """The id of share ``replica`` of the time-sliced GPU ``gpu``; a server is given the GPU's own UUID."""
    return f"{gpu}::{replica}"
