# egs-hub in Zero to JupyterHub's hub: SliceKubeSpawner, the egs service's options, the admin
# scope and roles (egs_hub/kube_hub.py, sharing egs_hub/hub_settings.py with the embedded default).
#
# The egs-hub chart mounts this directory into the hub pod at /usr/local/etc/jupyterhub/egs/, and its
# hub.extraConfig runs the Python files there after Zero to JupyterHub's own settings (hub.config,
# hub.services), with `c` in scope; egs_hub_settings.json beside them holds what the chart's values
# say (the cluster's name in egs-hub, the release's namespace, admin groups). The hub image
# (docker/hub) has egs-hub installed.
import json
import os

from egs_hub.kube_hub import configure_kube_hub

_settings_file = os.environ.get("EGS_HUB_SETTINGS", "/usr/local/etc/jupyterhub/egs/egs_hub_settings.json")
with open(_settings_file) as _f:
    configure_kube_hub(c, json.load(_f))  # noqa: F821 (the hub's config object)
