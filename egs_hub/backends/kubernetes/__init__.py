"""The Kubernetes backend: GPU nodes of a cluster labelled and tainted into slices (kubernetes_asyncio)."""

from .backend import ClusterUnavailable, KubernetesBackend

__all__ = ["ClusterUnavailable", "KubernetesBackend"]
