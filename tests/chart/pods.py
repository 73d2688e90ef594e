"""Run the containers that ``helm template`` renders as local processes, as the kubelet would start them.

Vocabulary: *manifests* are the rendered objects; a *workload* is a rendered
Deployment or StatefulSet whose pod template holds the *container* (a pod read
from the API runs the same way); the *image defaults* are what an image gives a
container that does not say (its command and working folder), read from our
Dockerfiles. Where the processes meet (one network namespace in which every
Service name resolves to 127.0.0.1) is rendered_hub_scenario.py's part.

What a container gets, as in a pod:
- the files of its ``configMap``, ``secret``, ``persistentVolumeClaim`` and
  ``emptyDir`` volumes at their ``mountPath`` (``subPath``, ``items``), and the
  ServiceAccount token, CA and namespace at
  ``/var/run/secrets/kubernetes.io/serviceaccount`` unless the pod opts out,
  in a mount namespace of its own (pod_exec.py);
- its ``env`` and ``envFrom`` (values, ``$(VAR)`` references, ``fieldRef``,
  ``secretKeyRef``, ``configMapKeyRef``), the Services' ``<NAME>_SERVICE_HOST``
  and ``_PORT`` variables and ``KUBERNETES_SERVICE_HOST``/``PORT`` of the API
  server, as the kubelet sets them;
- its ``command`` and ``args`` with ``$(VAR)`` expanded, else the image's.

Executables come from this checkout's environment (the virtualenv, the
configurable-http-proxy that ``make`` installs), standing in for the images.
A volume or reference of another kind is an error naming it, never ignored.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml
from dockerfile_parse import DockerfileParser

ROOT = Path(__file__).resolve().parents[2]
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_RUNS_FROM = (str(ROOT), sys.prefix)  # what the processes run from: this checkout and its Python
# Zero to JupyterHub's hub image (images/hub/Dockerfile of its 4.3.2 tag), the base of docker/hub.
Z2JH_HUB_DEFAULTS = (["jupyterhub", "--config", "/usr/local/etc/jupyterhub/jupyterhub_config.py"], "/srv/jupyterhub")
# Jupyter Docker Stacks' images (docker-stacks-foundation: WORKDIR the notebook user's home), the base of
# docker/singleuser; KubeSpawner always gives the command (singleuser.cmd).
DOCKER_STACKS_DEFAULTS = (["start-notebook.py"], "/home/jovyan")
_REFERENCE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\$")


class RenderedError(AssertionError):
    """What the chart rendered cannot run as it is; the message names the object and field."""


def image_defaults(image: str) -> tuple[list[str] | None, str]:
    """(command, working folder) an image gives a container: from docker/<image>/Dockerfile for ours.

    Another image's are not known here: no command, and ``/`` as the folder."""
    repository = image.rsplit(":", 1)[0]
    name = repository.removeprefix("egs-hub/")
    dockerfile = ROOT / "docker" / name / "Dockerfile"
    if repository == name or not dockerfile.exists():
        return None, "/"
    parser = DockerfileParser(str(dockerfile), cache_content=True)
    steps = [(i["instruction"], i["value"]) for i in parser.structure]
    cmd = [json.loads(v) for k, v in steps if k == "CMD"]
    workdir = [v for k, v in steps if k == "WORKDIR"]
    bases = {"hub": Z2JH_HUB_DEFAULTS, "singleuser": DOCKER_STACKS_DEFAULTS}
    if name in bases:  # built FROM Z2JH's hub image or Docker Stacks, whose command and folder they keep
        base_cmd, base_dir = bases[name]
        return (cmd[-1] if cmd else base_cmd), (workdir[-1] if workdir else base_dir)
    if not cmd:
        raise RenderedError(f"docker/{name}/Dockerfile has no CMD and the container no command")
    return cmd[-1], (workdir[-1] if workdir else "/")


@dataclass
class Manifests:
    objects: list[dict]
    namespace: str

    @classmethod
    def parse(cls, text: str, namespace: str) -> Manifests:
        return cls([o for o in yaml.safe_load_all(text) if o], namespace)

    def find(self, kind: str, name: str) -> dict:
        found = [o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name]
        if not found:
            names = sorted(o["metadata"]["name"] for o in self.objects if o["kind"] == kind)
            raise RenderedError(f"no {kind} {name!r} was rendered (there are: {', '.join(names) or 'none'})")
        return found[0]

    def of_kind(self, kind: str) -> list[dict]:
        return [o for o in self.objects if o["kind"] == kind]

    def data(self, kind: str, name: str) -> dict[str, bytes]:
        """The keys of a ConfigMap or Secret as bytes."""
        obj = self.find(kind, name)
        out = {k: v.encode() for k, v in (obj.get("data") or {}).items()} if kind == "ConfigMap" else {}
        if kind == "ConfigMap":
            out.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        else:
            out.update({k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()})
            out.update({k: v.encode() for k, v in (obj.get("stringData") or {}).items()})
        return out

    def pod_template(self, name: str) -> dict:
        for kind in ("Deployment", "StatefulSet"):
            for obj in self.of_kind(kind):
                if obj["metadata"]["name"] == name:
                    return obj["spec"]["template"]
        raise RenderedError(f"no Deployment or StatefulSet {name!r} was rendered")

    def service_env(self) -> dict[str, str]:
        """The variables the kubelet gives every pod for the Services of its namespace."""
        env = {}
        for service in self.of_kind("Service"):
            ports = service["spec"].get("ports") or []
            if not ports or service["spec"].get("clusterIP") == "None":
                continue
            prefix = service["metadata"]["name"].upper().replace("-", "_")
            env[f"{prefix}_SERVICE_HOST"] = "127.0.0.1"
            env[f"{prefix}_SERVICE_PORT"] = str(ports[0]["port"])
            for port in ports:
                if port.get("name"):
                    env[f"{prefix}_SERVICE_PORT_{port['name'].upper().replace('-', '_')}"] = str(port["port"])
        return env

    def host_names(self) -> list[str]:
        """Every name a Service answers to in the cluster's DNS."""
        names = []
        for service in self.of_kind("Service"):
            name = service["metadata"]["name"]
            ns = service["metadata"].get("namespace", self.namespace)
            names += [name, f"{name}.{ns}", f"{name}.{ns}.svc", f"{name}.{ns}.svc.cluster.local"]
        return names

    def container_port(self, service: dict, port: dict) -> int:
        """The port a Service's port sends to, resolving a named targetPort in the pods it selects."""
        target = port.get("targetPort", port["port"])
        if isinstance(target, int):
            return target
        selector = service["spec"].get("selector") or {}
        for kind in ("Deployment", "StatefulSet"):
            for workload in self.of_kind(kind):
                labels = workload["spec"]["template"]["metadata"].get("labels") or {}
                if selector and selector.items() <= labels.items():
                    for c in workload["spec"]["template"]["spec"]["containers"]:
                        for p in c.get("ports") or []:
                            if p.get("name") == target:
                                return p["containerPort"]
        raise RenderedError(f"Service {service['metadata']['name']}: no pod it selects has a port named {target!r}")


@dataclass
class ApiServer:
    """How pods reach the Kubernetes API: host, port, and their ServiceAccount's token and CA."""

    host: str
    port: int
    token: str
    ca_pem: bytes


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: defined variables are replaced, others kept as written, ``$$`` is ``$``."""

    def one(match: re.Match) -> str:
        if match[0] == "$$":
            return "$"
        return env.get(match[1], match[0])

    return _REFERENCE.sub(one, text)


class LocalPod:
    """One container of a pod (a rendered workload's template, or a pod read from the API), staged under
    ``root`` and started with pod_exec."""

    def __init__(self, manifests: Manifests, pod: str, template: dict, container: str, root: Path, api: ApiServer):
        self.manifests = manifests
        self.name = pod
        self.namespace = template.get("metadata", {}).get("namespace") or manifests.namespace
        self.template = template
        spec = self.template["spec"]
        found = [c for c in [*spec.get("initContainers", []), *spec["containers"]] if c["name"] == container]
        if not found:
            raise RenderedError(f"pod {pod} has no container {container!r}")
        self.container = found[0]
        self.root = root / pod  # the pod's volumes, shared by its containers
        self.own = self.root / "containers" / container
        self.api = api
        self.where = f"{pod}/{container}"
        self.tmpdir: Path | None = None  # the pod's /tmp, where it cannot be mounted there (files)

    @classmethod
    def of_workload(cls, manifests: Manifests, workload: str, container: str, root: Path, api: ApiServer) -> LocalPod:
        return cls(manifests, f"{workload}-0", manifests.pod_template(workload), container, root, api)

    # 1. files
    def _volume_dir(self, volume: dict) -> Path:
        path = self.root / "volumes" / volume["name"]
        if path.exists():
            return path
        path.mkdir(parents=True)
        if "configMap" in volume or "secret" in volume:
            kind, ref = ("ConfigMap", volume["configMap"]) if "configMap" in volume else ("Secret", volume["secret"])
            name = ref.get("name") or ref.get("secretName")
            data = self.manifests.data(kind, name)
            items = ref.get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                if item["key"] not in data:
                    raise RenderedError(f"{self.where}: volume {volume['name']}: {kind} {name} has no {item['key']}")
                target = path / item["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data[item["key"]])
        elif not ({"persistentVolumeClaim", "emptyDir"} & volume.keys()):
            kinds = sorted(set(volume) - {"name"})
            raise RenderedError(f"{self.where}: volume {volume['name']} of kind {kinds} is not emulated")
        return path

    def files(self) -> dict[str, Path]:
        """Absolute path in the container -> the staged file or folder that is there."""
        volumes = {v["name"]: v for v in self.template["spec"].get("volumes") or []}
        placed: dict[str, Path] = {}
        for mount in self.container.get("volumeMounts") or []:
            if mount["name"] not in volumes:
                raise RenderedError(f"{self.where}: volumeMount of {mount['name']}, which the pod does not define")
            source = self._volume_dir(volumes[mount["name"]])
            if mount.get("subPath"):
                source = source / mount["subPath"]
                if not source.exists():  # as the kubelet does, a missing subPath of a volume is a new folder
                    source.mkdir(parents=True)
            target = mount["mountPath"].rstrip("/")
            if target == "/tmp" and any(kept.startswith("/tmp/") for kept in _RUNS_FROM):
                # The checkout or its Python lives under /tmp (a CI clone): a mount there would hide them,
                # so the pod's /tmp (an emptyDir) is given as its TMPDIR instead.
                self.tmpdir = source
                continue
            placed[target] = source
        if self.template["spec"].get("automountServiceAccountToken", True):
            account = self.root / "serviceaccount"
            account.mkdir(parents=True, exist_ok=True)
            (account / "token").write_text(self.api.token)
            (account / "ca.crt").write_bytes(self.api.ca_pem)
            (account / "namespace").write_text(self.namespace)
            placed.setdefault(SERVICE_ACCOUNT_DIR, account)
        return placed

    def _mounts(self, placed: dict[str, Path], workdir: str) -> tuple[list[list[str]], list[list[str]]]:
        """pod_exec's binds (staged source, target) and covers (skeleton, existing folder) for ``placed``."""
        if not any(workdir == p or workdir.startswith(p + "/") for p in placed) and not os.path.isdir(workdir):
            empty = self.own / "workdir"
            empty.mkdir(parents=True, exist_ok=True)
            placed[workdir] = empty  # the image's WORKDIR: an empty folder of the image
        covers: dict[str, Path] = {}
        for target, source in sorted(placed.items()):
            if os.path.lexists(target):
                continue
            # A skeleton of the nearest existing folder holds an empty file or folder where the target goes.
            existing = target
            while not os.path.isdir(existing):
                existing = os.path.dirname(existing)
            anchor = os.path.realpath(existing)
            skeleton = covers.setdefault(anchor, self.own / "covers" / anchor.strip("/").replace("/", "_"))
            placeholder = skeleton / os.path.relpath(target, existing)
            if source.is_dir():
                placeholder.mkdir(parents=True, exist_ok=True)
            else:
                placeholder.parent.mkdir(parents=True, exist_ok=True)
                placeholder.touch()
        anchors = sorted(covers)
        for outer in anchors:
            for inner in anchors:
                if inner != outer and inner.startswith(outer.rstrip("/") + "/"):
                    raise RenderedError(f"{self.where}: mounts under both {outer} and {inner} are not emulated")
        sources = [str(s) for s in placed.values()]
        # A mount that would hide staged sources (e.g. an emptyDir on /tmp) comes after the others.
        hides = lambda target: any(s.startswith(target.rstrip("/") + "/") for s in sources)  # noqa: E731
        binds = sorted(([str(s), t] for t, s in placed.items()), key=lambda b: (hides(b[1]), b[1]))
        return binds, [[str(skeleton), anchor] for anchor, skeleton in covers.items()]

    # 2. environment
    def _value_from(self, source: dict, name: str) -> str | None:
        if "fieldRef" in source:
            field = source["fieldRef"]["fieldPath"]
            fields = {
                "metadata.namespace": self.namespace,
                "metadata.name": self.name,
                "status.podIP": "127.0.0.1",
                "spec.serviceAccountName": self.template["spec"].get("serviceAccountName", "default"),
            }
            if field not in fields:
                raise RenderedError(f"{self.where}: env {name}: fieldRef {field} is not emulated")
            return fields[field]
        for key, kind in (("secretKeyRef", "Secret"), ("configMapKeyRef", "ConfigMap")):
            if key in source:
                ref = source[key]
                data = self.manifests.data(kind, ref["name"])
                if ref["key"] not in data:
                    if ref.get("optional"):
                        return None
                    raise RenderedError(f"{self.where}: env {name}: {kind} {ref['name']} has no key {ref['key']}")
                return data[ref["key"]].decode()
        raise RenderedError(f"{self.where}: env {name}: valueFrom {sorted(source)} is not emulated")

    def env(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        if self.tmpdir is not None:
            env["TMPDIR"] = str(self.tmpdir)
        env.update(self.manifests.service_env())
        env.update(
            KUBERNETES_SERVICE_HOST=self.api.host,
            KUBERNETES_SERVICE_PORT=str(self.api.port),
            KUBERNETES_SERVICE_PORT_HTTPS=str(self.api.port),
            HOSTNAME=self.name,
        )
        for source in self.container.get("envFrom") or []:
            kind, ref = ("ConfigMap", source.get("configMapRef")) if "configMapRef" in source else ("Secret", None)
            ref = ref or source.get("secretRef")
            if ref is None:
                raise RenderedError(f"{self.where}: envFrom {sorted(source)} is not emulated")
            prefix = source.get("prefix", "")
            env.update({prefix + k: v.decode() for k, v in self.manifests.data(kind, ref["name"]).items()})
        for var in self.container.get("env") or []:
            if "valueFrom" in var:
                value = self._value_from(var["valueFrom"], var["name"])
                if value is not None:
                    env[var["name"]] = value
            else:
                env[var["name"]] = expand(str(var.get("value", "")), env)
        return env

    # 3. command
    def argv(self, env: dict[str, str]) -> tuple[list[str], str]:
        image_cmd, image_dir = image_defaults(self.container["image"])
        command, args = self.container.get("command"), self.container.get("args")
        # Our images have no ENTRYPOINT (Z2JH's hub image has tini, which runs what follows it):
        # args alone are the command line, and neither means the image's CMD.
        if command is None:
            command, args = (args, []) if args is not None else (image_cmd, [])
        if command is None:
            raise RenderedError(f"{self.where}: image {self.container['image']} is not one of docker/: give a command")
        argv = [expand(a, env) for a in [*command, *(args or [])]]
        return argv, self.container.get("workingDir") or image_dir

    def start(self, base_env: dict[str, str], log: Path) -> subprocess.Popen:
        placed = self.files()
        env = self.env(base_env)
        argv, workdir = self.argv(env)
        binds, covers = self._mounts(placed, workdir)
        self.own.mkdir(parents=True, exist_ok=True)
        spec = self.own / "pod.json"
        spec.write_text(json.dumps({"binds": binds, "covers": covers, "cwd": workdir, "env": env, "argv": argv}))
        out = open(log, "wb")  # noqa: SIM115 (the process writes to it until it is stopped)
        return subprocess.Popen(
            ["unshare", "--mount", "--propagation", "private", sys.executable, "-m", "tests.chart.pod_exec", str(spec)],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
