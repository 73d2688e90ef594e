"""Tests of the Helm chart charts/egs-hub, rendered with its Zero to JupyterHub dependency."""
