"""AsyncEGSClient against a real egs-hub: the same operations as EGSClient, awaited."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from egs_hub.client import GPR, AsyncEGSClient, EGSError

from ..service.hub import Hub


async def until_provisioned(client: AsyncEGSClient, gpr_id: int) -> GPR:
    for _ in range(150):
        gpr = await client.gpr(gpr_id)
        if gpr.status == "provisioned":
            return gpr
        await asyncio.sleep(0.1)
    raise AssertionError(f"GPR {gpr_id} was not provisioned within 15 s")


async def test_a_gpr_through_the_async_client(hub: Hub, member, make_slice):
    alice, _ = member("alice")
    team = make_slice(alice)
    async with AsyncEGSClient(hub.api, hub.user_token(alice)) as as_alice:
        assert [s.name for s in await as_alice.slices()] == [team]
        options = (await as_alice.wait_times(team, "1h", nodes=1)).options
        assert {o.shape.name for o in options} == {"H100-80GB x8", "A100-40GB x4"}
        asked = await as_alice.create_gpr(team, timedelta(minutes=10), nodes=1, shape="A100")
        gpr = await until_provisioned(as_alice, asked.id)
        assert len(gpr.bound_gpus) == 4 and gpr.bound_nodes == ("a100-a",)
        released = await as_alice.release_gpr(gpr.id)
        assert released.end_reason == "released-early"
        with pytest.raises(EGSError) as error:
            await as_alice.create_gpr(team, "1h")
        assert (error.value.status, error.value.field) == (400, "gpus")
        assert str(error.value) == "give gpus (a number of GPUs) or nodes (whole nodes)"
