"""Spawners that start a user's server inside a slice, seeing only its GPUs.

SliceKubeSpawner needs KubeSpawner (``pip install egs-hub[kubernetes]``); it is
imported when first named, so SliceLocalSpawner works without it.
"""

from .local import SliceLocalSpawner

__all__ = ["SliceKubeSpawner", "SliceLocalSpawner"]


def __getattr__(name: str):
    if name == "SliceKubeSpawner":
        from .kube import SliceKubeSpawner

        return SliceKubeSpawner
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
