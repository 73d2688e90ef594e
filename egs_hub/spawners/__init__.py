"""Spawners that start a user's server inside a slice, seeing only its GPUs."""

from .local import SliceLocalSpawner

__all__ = ["SliceLocalSpawner"]
