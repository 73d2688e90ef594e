"""``python -m egs_hub.service``: what JupyterHub runs as the managed service."""

from .app import EGSService

if __name__ == "__main__":
    EGSService.launch_instance()
