"""egs-hub: a Jupyter-native Elastic GPU Service."""

__version__ = "0.1.0"


def load_ipython_extension(ipython) -> None:
    """``%load_ext egs_hub``: the %egs magic (egs_hub.lab.magics)."""
    from .lab.magics import EGSMagics

    ipython.register_magics(EGSMagics)
