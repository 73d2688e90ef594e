"""The Kubernetes backend: GPU nodes of a cluster labelled and tainted into slices (kubernetes_asyncio)."""

from .backend import ClusterUnavailable, KubernetesBackend
from .kubeconfig import SliceNotSetUp
from .slice_objects import SliceConflict

__all__ = ["ClusterUnavailable", "KubernetesBackend", "SliceConflict", "SliceNotSetUp"]
