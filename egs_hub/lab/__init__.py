"""egs-hub inside JupyterLab: the single-user side.

- ``egs_hub.lab.server``: the jupyter-server extension (``/egs/...``), enabled in
  every jupyter server of the environment by ``jupyter-config/server-config/egs_hub.json``.
- ``egs_hub.lab.magics``: ``%load_ext egs_hub``, then ``%egs ...``.
- ``RequestForm()``, ``GpuMonitor()``: ipywidgets (``egs_hub.lab.widgets``).

Each is imported when first used: the server does not import ipywidgets, and a
notebook does not import jupyter_server.
"""

WIDGETS = ("RequestForm", "GpuMonitor")


def __getattr__(name: str):
    if name in WIDGETS:
        from . import widgets

        return getattr(widgets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _jupyter_server_extension_points() -> list[dict]:
    from .server import EGSExtension

    return [{"module": "egs_hub.lab.server", "app": EGSExtension}]
