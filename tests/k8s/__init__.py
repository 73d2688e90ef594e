"""Tests of the Kubernetes backend against an API emulator (or a real cluster with --k8s-context)."""
