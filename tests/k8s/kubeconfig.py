"""A kubeconfig file for one cluster: server URL, bearer token, one context, as kubectl writes them."""

from __future__ import annotations

import pathlib

import yaml


def write_kubeconfig(path: pathlib.Path, server: str, token: str, context: str) -> pathlib.Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server}}],
        "users": [{"name": f"{context}-admin", "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": f"{context}-admin"}}],
        "current-context": context,
    }
    path.write_text(yaml.safe_dump(config))
    return path
