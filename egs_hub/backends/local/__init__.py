"""The local backend: one host, its GPUs from NVML or declared in config."""

from .backend import LocalBackend

__all__ = ["LocalBackend"]
