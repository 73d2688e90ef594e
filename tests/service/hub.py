"""A real egs-hub (JupyterHub, proxy, EGS service) for end-to-end tests, and its clients.

Every request goes through ``Client.call``, which also checks what every API
answer must hold: a JSON body, the content type, the error shape, and the status and
body the OpenAPI document lists for the operation (contract.py).
"""

from __future__ import annotations

import html
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from urllib.parse import quote

import requests

from egs_hub.embedded import free_port

from ..metrics.prometheus_server import (
    ExpositionServer,
    Prometheus,
    read_recorded_exposition,
    start_prometheus,
)
from .contract import contract

HERE = os.path.dirname(__file__)
ADMIN_PASSWORD = "admin-password"  # the hub admin's, in $EGS_ADMIN_PASSWORD
UNMANAGED_SERVICE_CONFIG = "hub_unmanaged_service.py"
ROOT = os.path.dirname(os.path.dirname(HERE))


def chp_on_path() -> str:
    """PATH with configurable-http-proxy: the one on PATH, else the one `make` installs."""
    path = os.environ.get("PATH", "")
    local = os.path.join(ROOT, ".cache", "node", "node_modules", ".bin")
    return f"{local}{os.pathsep}{path}" if os.path.isdir(local) else path


class APIError(AssertionError):
    pass


@dataclass
class Client:
    base: str
    token: str | None
    session: requests.Session = field(default_factory=requests.Session)

    def call(self, method: str, path: str, body: object = None, *, expect: int | None = None, **kw):
        status, data = self.answer(method, path, body, **kw)
        if expect is not None and status != expect:
            raise APIError(f"{method} {path} answered {status}, not {expect}: {str(data)[:500]}")
        return data

    def answer(self, method: str, path: str, body: object = None, **kw) -> tuple[int, object]:
        """The status and JSON body (None for a 204) of a request, once checked against the document."""
        headers = {"Authorization": f"token {self.token}"} if self.token else {}
        response = self.session.request(
            method, self.base + path, json=body, headers=headers, timeout=60, allow_redirects=False, **kw
        )
        if response.status_code != 204:
            assert response.headers["Content-Type"].startswith("application/json"), response.text[:300]
            data = response.json()
            if response.status_code >= 400:
                assert set(data) >= {"status", "message"} and data["status"] == response.status_code, data
        else:
            data = None
        contract(self.base).check(method, path, response.status_code, data)
        return response.status_code, data

    def get(self, path: str, **kw):
        return self.call("GET", path, **kw)

    def post(self, path: str, body: object = None, **kw):
        return self.call("POST", path, body, **kw)

    def get_all(self, path: str, key: str) -> list:
        """Every item of a list endpoint: its pages' ``key`` items, following ``next_cursor``."""
        items, cursor = [], None
        separator = "&" if "?" in path else "?"
        for _ in range(10_000):
            page = self.get(path + (f"{separator}cursor={cursor}" if cursor else ""), expect=200)
            items.extend(page[key])
            cursor = page["next_cursor"]
            if cursor is None:
                return items
        raise AssertionError(f"GET {path} kept answering a next_cursor")


@dataclass
class Hub:
    url: str
    data_dir: str
    admin_token: str
    process: subprocess.Popen
    log_path: str
    db_url: str = ""

    @property
    def api(self) -> str:
        return f"{self.url}/services/egs/api/v1/"

    def hub_api(self, method: str, path: str, body: object = None, expect: tuple[int, ...] = (200, 201, 204)):
        response = requests.request(
            method,
            f"{self.url}/hub/api/{path}",
            json=body,
            timeout=60,
            headers={"Authorization": f"token {self.admin_token}"},
        )
        assert response.status_code in expect, f"hub {method} {path}: {response.status_code} {response.text}"
        return response.json() if response.content else None

    def user_token(self, name: str) -> str:
        """A fresh API token of hub user ``name``, created (as a hub user) if missing."""
        self.hub_api("POST", f"users/{quote(name)}", expect=(201, 409))
        return self.hub_api("POST", f"users/{quote(name)}/tokens", {"note": "tests"})["token"]

    def client(self, token: str | None) -> Client:
        return Client(self.api, token)

    def direct_client(self, token: str | None) -> Client:
        """A client of the EGS service at its own address, not through the hub's proxy."""
        url = self.hub_api("GET", "services/egs")["url"].rstrip("/")
        return Client(self.api.replace(self.url, url, 1), token)

    def admin(self) -> Client:
        return self.client(self.admin_token)

    def admin_pages(self) -> PageSession:
        """The hub's pages as the hub admin ``admin``, logged in with the password."""
        pages = PageSession(self.url)
        assert pages.log_in("admin", ADMIN_PASSWORD).status_code == 302, "the hub admin could not log in"
        return pages

    def invite_link(self, name: str) -> str:
        """A signup link for ``name`` that needs no admin's approval, made at /hub/invite."""
        return invite(self.admin_pages(), name)

    def log(self) -> str:
        with open(self.log_path) as f:
            return f.read()

    def service_running(self) -> bool:
        """Whether this hub's EGS service, or its supervisor, runs."""
        for module in ("egs_hub.service", "egs_hub.service.supervise"):
            try:
                self.service_pid(module)
            except AssertionError:
                continue
            return True
        return False

    def service_pid(self, module: str = "egs_hub.service") -> int:
        """The pid of this hub's EGS service process (``python -m module``; its supervisor's with
        ``egs_hub.service.supervise``)."""
        marker = f"EGS_DATA_DIR={self.data_dir}".encode()
        argument = f"\0{module}\0".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    command = f.read()
                with open(f"/proc/{entry}/environ", "rb") as f:
                    environment = f.read().split(b"\0")
            except OSError:
                continue
            if argument in command and marker in environment:
                return int(entry)
        raise AssertionError(f"no {module} process is running")


@dataclass
class Page:
    status: int
    text: str

    @property
    def alert(self) -> str:
        """The page's alert text, tags dropped and whitespace collapsed ("" when it has none)."""
        found = re.search(r'role="alert">(.*?)</div>', self.text, re.S)
        return " ".join(re.sub(r"<[^>]+>", " ", html.unescape(found.group(1))).split()) if found else ""


class PageSession:
    """The hub's HTML pages as a browser uses them: a cookie session posting forms with their _xsrf field."""

    def __init__(self, url: str):
        self.base = url
        self.session = requests.Session()
        # The hub's pages say "text/html" without a charset (their <meta> says UTF-8), which requests
        # would read as ISO-8859-1: a name like "émile" would not read back as typed.
        self.session.hooks["response"].append(lambda response, *args, **kwargs: setattr(response, "encoding", "utf-8"))
        self.xsrf = ""

    def get(self, path: str) -> Page:
        response = self.session.get(self.url(path), timeout=30)
        self.xsrf = re.search(r'name="_xsrf" value="([^"]+)"', response.text).group(1)
        return Page(response.status_code, response.text)

    def submit(self, path: str, **fields: str) -> requests.Response:
        """GET the form at ``path``, then POST ``fields`` to it (the hub's forms post to their own URL)."""
        self.get(path)
        return self.session.post(self.url(path), data={"_xsrf": self.xsrf, **fields}, timeout=30, allow_redirects=False)

    def url(self, path: str) -> str:
        return path if path.startswith("http") else f"{self.base}{path}"

    def log_in(self, name: str, password: str) -> requests.Response:
        return self.submit("/hub/login", username=name, password=password)

    def sign_up(self, name: str, password: str, link: str = "/hub/signup") -> Page:
        response = self.submit(link, username=name, signup_password=password, signup_password_confirmation=password)
        return Page(response.status_code, response.text)


def invite(admin_pages: PageSession, name: str) -> str:
    """The link of a new signup invite for ``name``, made on /hub/invite by a logged-in admin."""
    response = admin_pages.submit("/hub/invite", username=name)
    assert response.status_code == 200, Page(response.status_code, response.text).alert
    return html.unescape(re.search(r'<code id="invite-link">(.*?)</code>', response.text).group(1))


def wait_for(predicate, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def restart_service(hub: Hub) -> None:
    """SIGKILL the hub's EGS service (no clean shutdown); return once its supervisor has started it
    again (within 2 s) and it answers /health. The new service reads everything from the store."""
    old_pid = hub.service_pid()
    supervisor = hub.service_pid("egs_hub.service.supervise")
    os.kill(old_pid, signal.SIGKILL)

    def back() -> bool:
        try:
            return requests.get(hub.api + "health", timeout=2).status_code == 200
        except (requests.ConnectionError, requests.Timeout):  # a slow answer on a loaded machine: not yet
            return False

    def restarted() -> bool:
        try:
            return hub.service_pid() != old_pid
        except AssertionError:
            return False

    wait_for(restarted, 2, "the supervisor to start the service again", interval=0.05)
    wait_for(back, 60, "the restarted service to answer", interval=0.2)
    assert hub.service_pid("egs_hub.service.supervise") == supervisor
    assert f"the EGS service (pid {old_pid}) killed by SIGKILL" in hub.log()


def server_environment(hub: Hub, user: str) -> dict[str, str]:
    model = hub.hub_api("GET", f"users/{user}")
    pid = model["servers"][""]["state"]["pid"]
    with open(f"/proc/{pid}/environ", "rb") as f:
        pairs = [item.split(b"=", 1) for item in f.read().split(b"\0") if b"=" in item]
    return {k.decode(): v.decode() for k, v in pairs}


def start_server(hub: Hub, user: str, slice_name: str) -> None:
    hub.hub_api("POST", f"users/{user}/server", {"slice": slice_name}, expect=(201, 202))
    wait_for(
        lambda: (hub.hub_api("GET", f"users/{user}")["servers"].get("") or {}).get("ready"),
        120,
        f"{user}'s server to be ready",
        interval=0.5,
    )


def start_hub(data_dir: str, db_url: str, port: int, **options) -> Hub:
    """egs-hub up (``options`` as ``start_hub_once`` takes them), started a second time on new ports
    when the first start fails: egs-hub up picks free ports for the proxy's API and the service, and
    a hub another test worker starts at the same moment can take one of them between the pick and the
    bind (the hub then talks to that other proxy). A second failure is the test's error."""
    try:
        return start_hub_once(data_dir, db_url, port, **options)
    except AssertionError as first:
        print(f"egs-hub up did not start; starting it again on new ports. The first try:\n{first}", file=sys.stderr)
        return start_hub_once(data_dir, db_url, free_port(), **options)


def start_hub_once(
    data_dir: str,
    db_url: str,
    port: int,
    *,
    inventory: str = "inventory.yaml",
    env: dict[str, str] | None = None,
    config: str = "hub_test_config.py",
) -> Hub:
    """egs-hub up with the test ``config``, the declared ``inventory`` (files beside this one) and extra ``env``.

    Returns once the EGS service answers /health through the proxy; with a config that runs the
    service unmanaged (hub_unmanaged_service.py), once the hub's API answers. A hub that does not
    within 60 s is stopped before the AssertionError."""
    admin_token = secrets.token_hex(16)
    env = {
        **os.environ,
        **(env or {}),
        "PATH": chp_on_path(),
        "EGS_ADMIN_PASSWORD": ADMIN_PASSWORD,
        "EGS_TEST_ADMIN_TOKEN": admin_token,
    }
    log_path = os.path.join(data_dir, "hub.log")
    command = [
        sys.executable,
        "-m",
        "egs_hub.cli",
        "up",
        "--port",
        str(port),
        "--data-dir",
        data_dir,
        "--db-url",
        db_url,
        "--inventory",
        os.path.join(HERE, inventory),
        "--config",
        os.path.join(HERE, config),
    ]
    with open(log_path, "w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir)
    hub = Hub(f"http://127.0.0.1:{port}", data_dir, admin_token, process, log_path, db_url)

    def healthy() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"egs-hub up exited with {process.returncode}:\n{hub.log()[-3000:]}")
        try:
            return requests.get(ready_url, timeout=2).status_code == 200
        except (requests.ConnectionError, requests.Timeout):  # a slow answer on a loaded machine: not yet
            return False

    ready_url = f"{hub.url}/hub/api/" if config == UNMANAGED_SERVICE_CONFIG else hub.api + "health"
    try:
        wait_for(healthy, 60, f"egs-hub to answer {ready_url}")
    except AssertionError as e:
        if process.poll() is not None:  # healthy() said how it exited
            raise
        process.send_signal(signal.SIGINT)  # as stop_hub does, so that it stops its proxy and service
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        raise AssertionError(f"{e}:\n{hub.log()[-3000:]}") from None
    return hub


def stop_hub(hub: Hub) -> None:
    """Ctrl-C, as a person stops it: egs-hub must exit 0 and leave no service process behind."""
    hub.process.send_signal(signal.SIGINT)
    try:
        returncode = hub.process.wait(30)
    except subprocess.TimeoutExpired:
        hub.process.kill()
        hub.process.wait()
        raise AssertionError(f"egs-hub did not stop within 30 s of SIGINT:\n{hub.log()[-2000:]}") from None
    assert returncode == 0, f"egs-hub exited {returncode} on SIGINT:\n{hub.log()[-2000:]}"
    wait_for(lambda: not hub.service_running(), 10, "the EGS service to stop with the hub")


@contextmanager
def sqlite_hub(data_dir, **options) -> Iterator[Hub]:
    """egs-hub up on SQLite in ``data_dir`` (``options`` as start_hub takes them), stopped after."""
    hub = start_hub(str(data_dir), f"sqlite:///{data_dir}/egs.sqlite", free_port(), **options)
    try:
        yield hub
    finally:
        stop_hub(hub)


@dataclass
class DCGMHub:
    hub: Hub
    exporter: ExpositionServer
    prometheus: Prometheus


@contextmanager
def dcgm_hub(data_dir, db_url: str | None = None, inventory: str = "inventory_dcgm.yaml") -> Iterator[DCGMHub]:
    """egs-hub whose GPUs are the node of the recorded DCGM-exporter exposition (inventory_dcgm.yaml, or
    ``inventory`` with more nodes), read through a real Prometheus scraping it; SQLite in ``data_dir``
    unless ``db_url``."""
    exporter = ExpositionServer(read_recorded_exposition()).start()
    prometheus = start_prometheus(str(data_dir), [exporter.address])
    try:
        hub = start_hub(
            str(data_dir),
            db_url or f"sqlite:///{data_dir}/egs.sqlite",
            free_port(),
            inventory=inventory,
            env={"EGS_PROMETHEUS_URL": prometheus.url},
        )
        try:
            yield DCGMHub(hub, exporter, prometheus)
        finally:
            stop_hub(hub)
    finally:
        prometheus.stop()
        exporter.stop()


def until_status(client: Client, gpr_id: int, status: str, timeout: float = 15) -> dict:
    """The GPR once it has ``status`` (polled through ``client``)."""
    return wait_for(
        lambda: (g := client.get(f"gprs/{gpr_id}", expect=200))["status"] == status and g,
        timeout,
        f"GPR {gpr_id} to be {status}",
    )


def event_kinds(client: Client, gpr_id: int) -> list[tuple[str, str]]:
    """(kind, actor) of every event of the GPR, oldest first."""
    return [(e["kind"], e["actor"]) for e in client.get(f"events?gpr={gpr_id}", expect=200)["events"]]
