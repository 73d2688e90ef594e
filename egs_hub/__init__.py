"""egs-hub: a Jupyter-native Elastic GPU Service."""

__version__ = "0.1.0"
