# Loaded last by `egs-hub up --config` in the crash test: the test config, and the EGS service as an
# unmanaged hub service that the test starts, kills and restarts itself (JupyterHub notices a managed
# service's exit only at its next poll, up to 30 s later). The hub writes how to start the service
# into <data dir>/egs_service.json. The EGS service reads this file too: there it only loads the test
# config (the hub's environment has EGS_HUB_PORT, the service's has not).
import json
import os

from traitlets.config import Config

from egs_hub.embedded import configure_hub
from egs_hub.service.supervise import child_command

load_subconfig(os.path.join(os.path.dirname(__file__), "hub_test_config.py"))  # noqa: F821

if "EGS_HUB_PORT" in os.environ:
    # A sub-config sees only its own settings: make the embedded services again and replace them all.
    embedded = Config()
    configure_hub(embedded)
    services = [dict(s) for s in embedded.JupyterHub.services]
    service = next(s for s in services if s["name"] == "egs")
    service.pop("command")  # the supervisor's: the test is this service's supervisor, and kills the service itself
    launch = {
        "command": child_command([]),
        "environment": {
            **service.pop("environment"),
            "JUPYTERHUB_SERVICE_NAME": service["name"],
            "JUPYTERHUB_SERVICE_URL": service["url"],
            "JUPYTERHUB_SERVICE_PREFIX": f"/services/{service['name']}/",
            "JUPYTERHUB_API_TOKEN": service["api_token"],
            "JUPYTERHUB_API_URL": f"http://127.0.0.1:{os.environ['EGS_HUB_PORT']}/hub/api",
            "JUPYTERHUB_BASE_URL": "/",
            "JUPYTERHUB_CLIENT_ID": f"service-{service['name']}",
        },
    }
    c.JupyterHub.services = services + c.JupyterHub.services.get_value([])  # noqa: F821 (the test's admin service)
    with open(os.path.join(os.environ["EGS_DATA_DIR"], "egs_service.json"), "w") as f:
        json.dump(launch, f)
