"""The EGS control plane service."""
