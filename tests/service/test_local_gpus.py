"""EGSService.local_gpus: without it the service registers no "local" cluster (the Helm chart's pod has no
GPUs of its own, and must not show declared stand-ins), and NVML metrics are refused naming the option."""

from __future__ import annotations

import pytest
from traitlets import TraitError

from egs_hub.service.app import EGSService
from egs_hub.store.db import make_engine, upgrade


@pytest.fixture
def make_service(tmp_path, monkeypatch):
    """An EGSService on a migrated SQLite database, with the environment the hub gives it (the hub is not called)."""
    db_url = f"sqlite:///{tmp_path}/egs.sqlite"
    upgrade(make_engine(db_url))
    monkeypatch.setenv("JUPYTERHUB_API_TOKEN", "token")
    monkeypatch.setenv("JUPYTERHUB_API_URL", "http://127.0.0.1:9/hub/api")
    monkeypatch.delenv("EGS_INVENTORY", raising=False)
    return lambda **traits: EGSService(db_url=db_url, data_dir=str(tmp_path), **traits)


@pytest.mark.parametrize("local_gpus, want_clusters", [(True, ["local"]), (False, [])])
async def test_local_gpus_decides_whether_this_host_is_a_cluster(make_service, local_gpus, want_clusters):
    service = make_service(local_gpus=local_gpus, metrics_source="none")
    await service.setup()
    try:
        assert sorted(service.registry.states) == want_clusters
        assert (service.local_backend is None) is not local_gpus
    finally:
        await service.registry.close()


async def test_nvml_metrics_need_local_gpus(make_service):
    service = make_service(local_gpus=False, metrics_source="nvml")
    with pytest.raises(TraitError, match="local_gpus is False"):
        await service.setup()
    await service.registry.close()
