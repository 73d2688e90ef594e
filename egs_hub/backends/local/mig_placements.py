"""Choosing where the GPU instances of a MIG layout go on one GPU (issue 23); no NVML here.

Vocabulary (NVML's): a GPU in MIG mode has *memory slices* (8 on an H100 or A100), numbered from 0;
a GPU instance occupies a *placement* ``(start, size)``, the slices ``start`` to ``start + size - 1``.
NVML lists each GPU instance profile's *possible placements*
(nvmlDeviceGetGpuInstancePossiblePlacements), and creating a GPU instance fails where its placement
overlaps one in use. A layout (``{"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}``) *fits* a GPU when each
of its instances can be given a possible placement of its profile, no two overlapping.

Letting the driver place one instance after the other (nvmlDeviceCreateGpuInstance) can leave no
room for the rest: on an H100 80GB it puts that layout's 3g.40gb at slice 0, and the 2g.20gb and
two 1g.10gb then do not fit, while 3g.40gb at 4, 2g.20gb at 0 and 1g.10gb at 2 and 3 do. So the
placements are chosen here, before anything is created, as NVIDIA's mig-parted does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Placement = tuple[int, int]  # (start, size): the memory slices start .. start + size - 1
Chosen = tuple[str, int, int]  # (profile, start, size): where one GPU instance goes


def choose_placements(counts: Mapping[str, int], possible: Mapping[str, Sequence[Placement]]) -> list[Chosen] | None:
    """A placement for each of the ``counts`` instances of each profile, taken from the profile's
    ``possible`` placements (a profile missing there has none), no two overlapping; sorted by start.
    None when the layout does not fit.

    A depth-first search that backtracks. It places the instances in one order, which does not
    depend on the order of ``counts``: biggest placements first, then the profile with the fewest
    possible placements, then by name. A profile's instances are interchangeable, so each takes
    a placement listed after its predecessor's, and no assignment is tried twice."""
    order = sorted(counts, key=lambda name: (-_biggest(possible.get(name, ())), len(possible.get(name, ())), name))
    instances = [name for name in order for _ in range(counts[name])]
    chosen = _search(instances, possible, frozenset(), 0)
    return None if chosen is None else sorted(chosen, key=lambda c: (c[1], c[0]))


def _biggest(placements: Sequence[Placement]) -> int:
    return max((size for _start, size in placements), default=0)


def _search(
    instances: list[str], possible: Mapping[str, Sequence[Placement]], used: frozenset[int], first: int
) -> list[Chosen] | None:
    """Placements for ``instances`` around the slices ``used``, the first instance trying its profile's
    placements from index ``first``; None if there are none."""
    if not instances:
        return []
    name, rest = instances[0], instances[1:]
    placements = possible.get(name, ())
    for k in range(first, len(placements)):
        start, size = placements[k]
        slices = frozenset(range(start, start + size))
        if slices & used:
            continue
        tail = _search(rest, possible, used | slices, k + 1 if rest and rest[0] == name else 0)
        if tail is not None:
            return [(name, start, size), *tail]
    return None
