"""What tests of the Python client, the magics and the widgets share: ending a slice's GPRs, waiting for a status."""

from __future__ import annotations

from egs_hub.client import EGSClient, EGSError

from ..service.hub import wait_for

FINISHED = {"complete", "cancelled", "rejected", "failed"}


def end_gprs(admin: EGSClient, slice_name: str) -> bool:
    """Cancel or release what is left; True once every GPR of the slice is finished."""
    gprs = admin.gprs(slice=slice_name)
    for gpr in gprs:
        try:
            if gpr.status in ("pending-approval", "queued"):
                admin.cancel_gpr(gpr.id)
            elif gpr.status in ("provisioning", "provisioned"):
                admin.release_gpr(gpr.id)
        except EGSError as e:
            if e.status != 409:  # 409: it moved on since the listing; the next round sees it
                raise
    return all(g.status in FINISHED for g in gprs)


def until_status(client: EGSClient, gpr_id: int, status: str, timeout: float = 15):
    """The GPR once it has ``status``."""
    return wait_for(lambda: (g := client.gpr(gpr_id)).status == status and g, timeout, f"GPR {gpr_id} to be {status}")
