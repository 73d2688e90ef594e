"""What a caller may see of other tenants: one rule, decided here (issue 45).

Vocabulary: the *viewer* is the caller as this rule sees them. An egs-hub admin sees everything. Anyone
else sees *in full* what belongs to the slices they may see (the slices of their hub groups, and the
slices of the projects they manage: handlers/base.py ``is_member_of``); of another tenant's GPRs, windows
and GPUs they see only what shows how busy the GPUs are (shapes, counts, times, priorities, places in the
queue), never ids, names, slices, logs or reasons. A resource the caller may not see at all answers
exactly as one that does not exist: the handlers' 404 (``APIHandler.require_member_of``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Viewer:
    slices: frozenset[str] | None  # the slices seen in full; None: every one (an admin)

    @property
    def admin(self) -> bool:
        return self.slices is None

    def sees(self, slice_name: str | None) -> bool:
        """Whether what belongs to ``slice_name`` is shown in full (None: a slice since deleted)."""
        return self.slices is None or (slice_name is not None and slice_name in self.slices)


EVERYTHING = Viewer(None)
