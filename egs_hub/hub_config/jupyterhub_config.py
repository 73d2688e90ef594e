# JupyterHub config of the embedded default. `egs-hub up` sets the EGS_* variables it reads
# and runs JupyterHub with this file; --config FILE is loaded last, to override anything here.
import os

from egs_hub.embedded import configure_hub

configure_hub(c)  # noqa: F821 (JupyterHub provides c and load_subconfig)
if os.environ.get("EGS_HUB_EXTRA_CONFIG"):
    load_subconfig(os.environ["EGS_HUB_EXTRA_CONFIG"])  # noqa: F821
