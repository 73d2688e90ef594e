"""The %egs magic: its line parser (pure, by table) and every command in a real IPython shell
against a real egs-hub."""

from __future__ import annotations

import os
import secrets
import signal
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

import pytest
import requests
from IPython.core.interactiveshell import InteractiveShell

from egs_hub.client import EGSClient, EGSError
from egs_hub.embedded import free_port
from egs_hub.lab import magic_commands as cmd
from egs_hub.lab.tables import Table

from ..client.helpers import end_gprs
from ..service.hub import Hub, sqlite_hub, wait_for

ENDPOINT_SERVER = os.path.join(os.path.dirname(__file__), "..", "service", "endpoint_server.py")
NOW = datetime(2026, 11, 22, 12, 30, tzinfo=timezone(timedelta(hours=1)))


def ask(count=2, unit="gpus", duration=timedelta(hours=2), **options) -> cmd.Ask:
    return cmd.Ask(count, unit, duration, **options)


PARSED = {
    "request": ("request 2 gpus for 2h", cmd.Request(ask())),
    "one gpu": ("request 1 GPU for 45m", cmd.Request(ask(1, duration=timedelta(minutes=45)))),
    "nodes": ("request 2 nodes for 1d2h30m", cmd.Request(ask(2, "nodes", timedelta(days=1, hours=2, minutes=30)))),
    "a node": ("request 1 node for 90", cmd.Request(ask(1, "nodes", timedelta(seconds=90)))),
    "words": ("request 2 gpus for 2 hours 30 min", cmd.Request(ask(duration=timedelta(hours=2, minutes=30)))),
    "every option": (
        'request 2 gpus for 2h --shape "H100-80GB x8" --priority high --slice team-a --start-after 14:00 --wait',
        cmd.Request(
            ask(shape="H100-80GB x8", priority="high", slice="team-a", start_after=NOW.replace(hour=14, minute=0)),
            wait=True,
        ),
    ),
    "options with =": (
        "request --slice=b 2 gpus --priority=250 for 2h",
        cmd.Request(ask(slice="b", priority=250)),
    ),
    "band in capitals": ("request 2 gpus for 2h --priority Low", cmd.Request(ask(priority="low"))),
    "start after a past clock time is tomorrow": (
        "request 2 gpus for 2h --start-after 9:15",
        cmd.Request(ask(start_after=NOW.replace(hour=9, minute=15) + timedelta(days=1))),
    ),
    "start after a while": (
        "request 2 gpus for 2h --start-after +1h30m",
        cmd.Request(ask(start_after=NOW + timedelta(hours=1, minutes=30))),
    ),
    "start after a local ISO time": (
        "request 2 gpus for 2h --start-after 2026-11-23T08:00",
        cmd.Request(ask(start_after=datetime(2026, 11, 23, 8, tzinfo=NOW.tzinfo))),
    ),
    "start after a UTC time": (
        "request 2 gpus for 2h --start-after 2026-11-23T08:00Z",
        cmd.Request(ask(start_after=datetime(2026, 11, 23, 8, tzinfo=UTC))),
    ),
    "wait-times": ("wait-times 2 gpus for 2h", cmd.WaitTimes(ask())),
    "wait-times options": ("wait-times 1 node for 2h --shape A100", cmd.WaitTimes(ask(1, "nodes", shape="A100"))),
    "a share of a GPU": ("request 0.25 gpu for 1h", cmd.Request(ask(None, None, timedelta(hours=1), share=0.25))),
    "MIG instances": (
        'request 1 gpu for 1h --shape "H100-80GB 1g.10gb"',
        cmd.Request(ask(1, "gpus", timedelta(hours=1), shape="H100-80GB 1g.10gb")),
    ),
    "from a template": ("request --template big", cmd.Request(cmd.Ask(None, None, None, template="big"))),
    "template for a while": (
        "request --template big for 30m --wait",
        cmd.Request(cmd.Ask(None, None, timedelta(minutes=30), template="big"), wait=True),
    ),
    "template resized": (
        "wait-times 1 node --template=big",
        cmd.WaitTimes(cmd.Ask(1, "nodes", None, template="big")),
    ),
    "template in full": ("request 2 gpus for 2h --template big", cmd.Request(ask(template="big"))),
    "templates": ("templates", cmd.Templates()),
    "templates of a slice": ("templates --slice team-a", cmd.Templates("team-a")),
    "status": ("status", cmd.Status()),
    "gpus": ("gpus", cmd.Gpus()),
    "release mine": ("release", cmd.Release()),
    "release one": ("release 12", cmd.Release(12)),
    "release #": ("release #12", cmd.Release(12)),
    "wait mine": ("wait", cmd.Wait()),
    "wait one": ("wait 7", cmd.Wait(7)),
    "help": ("--help", cmd.Help()),
    "nothing is help": ("  ", cmd.Help()),
    "help word": ("help", cmd.Help()),
    "help of a command": ("request --help", cmd.Help()),
}

REFUSED = {
    "unknown command": ("launch 2 gpus", "unknown command 'launch'; commands: request, wait-times,"),
    "no count": ("request gpus for 2h", "expected %egs request N gpus|nodes for DURATION, e.g. %egs request 2 gpus"),
    "no for": ("request 2 gpus 2h", "expected %egs request N gpus|nodes for DURATION"),
    "no duration": ("request 2 gpus for", "'for' needs a duration; expected %egs request N gpus|nodes"),
    "nothing": ("wait-times", "expected %egs wait-times N gpus|nodes for DURATION, e.g. %egs wait-times 2 gpus"),
    "zero": ("request 0 gpus for 2h", "the count '0' must be a whole number from 1 to 100000"),
    "a share of a node": ("request 0.5 nodes for 2h", "the count '0.5' must be a whole number from 1 to 100000"),
    "a share above 1": ("request 1.5 gpus for 2h", "the count '1.5' must be a whole number from 1 to 100000"),
    "negative": ("request -2 gpus for 2h", "the count '-2' must be a whole number from 1 to 100000"),
    "unit": ("request 2 cpus for 2h", "'cpus' is not gpus or nodes"),
    "duration": ("request 2 gpus for 2 parsecs", "the duration '2 parsecs' is not a duration: use whole seconds"),
    "zero duration": ("request 2 gpus for 0m", "the duration '0m' is not a duration"),
    "unknown option": ("request 2 gpus for 2h --gpu-type H100", "unknown option --gpu-type for %egs request; options:"),
    "wait on wait-times": ("wait-times 2 gpus for 2h --wait", "unknown option --wait for %egs wait-times"),
    "option twice": ("request 2 gpus for 2h --shape A --shape B", "--shape is given more than once"),
    "option without value": ("request 2 gpus for 2h --shape", "--shape needs a value"),
    "option before option": ("request 2 gpus for 2h --slice --wait", "--slice needs a value"),
    "empty value": ("request 2 gpus for 2h --shape=", "--shape needs a value"),
    "priority word": ("request 2 gpus for 2h --priority urgent", "--priority 'urgent' must be low, medium, high or a"),
    "priority range": ("request 2 gpus for 2h --priority 301", "must be low, medium, high or a number from 1 to 300"),
    "start after": ("request 2 gpus for 2h --start-after soon", "--start-after 'soon' is not a time: use HH:MM"),
    "start after hour": ("request 2 gpus for 2h --start-after 25:00", "--start-after '25:00' is not a time"),
    "start after +": ("request 2 gpus for 2h --start-after +x", "--start-after +DURATION 'x' is not a duration"),
    "template and half a size": ("request 2 --template big", "expected %egs request N gpus|nodes for DURATION"),
    "template for nothing": ("request --template big for", "'for' needs a duration"),
    "templates args": ("templates all", "%egs templates takes only --slice NAME, not 'all'"),
    "templates option": ("templates --shape A100", "unknown option --shape for %egs templates; options: --slice"),
    "status args": ("status all", "%egs status takes no arguments, not 'all'"),
    "gpus args": ("gpus --sort power", "%egs gpus takes no arguments, not '--sort power'"),
    "release id": ("release twelve", "%egs release: 'twelve' is not a GPR id (a whole number like 12)"),
    "release zero": ("release 0", "%egs release: '0' is not a GPR id"),
    "wait ids": ("wait 1 2", "%egs wait takes at most one GPR id, not '1 2'"),
    "quotes": ('request 2 gpus for 2h --shape "H100', "cannot split the line into words: No closing quotation"),
}


@pytest.mark.parametrize(("line", "want"), PARSED.values(), ids=PARSED.keys())
def test_parse(line, want):
    assert cmd.parse_command(line, NOW) == want


@pytest.mark.parametrize(("line", "want_message"), REFUSED.values(), ids=REFUSED.keys())
def test_parse_refuses_with_one_line(line, want_message):
    with pytest.raises(cmd.CommandError) as error:
        cmd.parse_command(line, NOW)
    assert want_message in str(error.value) and "\n" not in str(error.value)


BANDS = {  # (band, slice's max_priority): want priority, or the error's start
    "high, no limit": ("high", 300, 201),
    "medium, no limit": ("medium", 300, 101),
    "low, no limit": ("low", 300, 1),
    "high within a cap": ("high", 250, 201),
    "medium at a cap in it": ("medium", 150, 101),
    "high at its lowest": ("high", 201, 201),
    "high over a cap": ("high", 150, "--priority high (201-300) is above your slice's max_priority 150; use low or"),
    "medium over a cap": ("medium", 80, "--priority medium (101-200) is above your slice's max_priority 80; use low,"),
}


@pytest.mark.parametrize(("band", "max_priority", "want"), BANDS.values(), ids=BANDS.keys())
def test_band_priority(band, max_priority, want):
    if isinstance(want, int):
        assert cmd.band_priority(band, max_priority) == want
    else:
        with pytest.raises(cmd.CommandError, match=want.replace("(", r"\(").replace(")", r"\)")):
            cmd.band_priority(band, max_priority)


def test_choose_slice():
    assert cmd.choose_slice("given", "env", None) == "given"
    assert cmd.choose_slice(None, "env", None) == "env"
    assert cmd.choose_slice(None, None, ["only"]) == "only"
    with pytest.raises(cmd.CommandError, match=r"^you are a member of no slice; ask an egs-hub admin"):
        cmd.choose_slice(None, None, [])
    with pytest.raises(cmd.CommandError, match=r"several slices \(a, b\); pick one with --slice NAME or set EGS_SLICE"):
        cmd.choose_slice(None, "", ["a", "b"])


@dataclass(frozen=True)
class FakeGPR:  # the two fields pick_gpr reads
    id: int
    status: str
    requested_by: str


def test_pick_gpr():
    gprs = [FakeGPR(1, "provisioned", "bob"), FakeGPR(2, "queued", "alice"), FakeGPR(3, "complete", "alice")]
    assert cmd.pick_gpr(gprs, ("queued", "provisioned"), "alice", "wait").id == 2
    with pytest.raises(cmd.CommandError, match=r"^your slices have several such GPRs \(1, 2\); say which: %egs wait 1"):
        cmd.pick_gpr(gprs, ("queued", "provisioned"), None, "wait")
    with pytest.raises(cmd.CommandError, match=r"^alice has no GPR that is provisioned; %egs status lists them"):
        cmd.pick_gpr(gprs, ("provisioned",), "alice", "release")


# The magic in a real shell against a real egs-hub.


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    with sqlite_hub(tmp_path_factory.mktemp("magics-hub")) as running:
        yield running


@pytest.fixture(scope="module")
def admin(hub) -> Iterator[EGSClient]:
    with EGSClient(hub.api, hub.admin_token) as client:
        yield client


@pytest.fixture
def shell() -> InteractiveShell:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "egs_hub")
    shell.magics_manager.registry["EGSMagics"].poll_interval = 0.1
    return shell


@pytest.fixture
def alice(hub, admin, monkeypatch) -> Iterator[tuple[str, list[str]]]:
    """A new user as the shell's environment, and the names of slices made for her (ended after)."""
    name = f"alice-{secrets.token_hex(3)}"
    for variable in ("EGS_SLICE", "JUPYTERHUB_API_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("EGS_API_URL", hub.api)
    monkeypatch.setenv("EGS_API_TOKEN", hub.user_token(name))
    monkeypatch.setenv("JUPYTERHUB_USER", name)
    slices: list[str] = []
    yield name, slices
    for slice_name in slices:
        wait_for(lambda s=slice_name: end_gprs(admin, s), 60, f"slice {slice_name}'s GPRs to finish")
        admin.delete_slice(slice_name)


def new_slice(admin: EGSClient, alice, **options) -> str:
    name, slices = alice
    slice_name = f"m-{secrets.token_hex(3)}"
    admin.create_slice(slice_name, members=[name], **options)
    slices.append(slice_name)
    return slice_name


def egs(shell: InteractiveShell, line: str):
    return shell.run_line_magic("egs", line)


def one_error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("egs: "), captured.err
    return lines[0].removeprefix("egs: ")


def test_request_wait_status_and_release(shell, admin, alice, capsys):
    name, _ = alice
    team = new_slice(admin, alice)
    answer = egs(shell, "request 2 gpus for 10m --shape H100 --wait")
    assert isinstance(answer, Table) and answer.title.startswith("GPR ") and answer.title.endswith(f"in slice {team}")
    (gpr,) = answer.items
    assert (gpr.status, gpr.requested_by, len(gpr.bound_gpus), gpr.shape) == ("provisioned", name, 2, "H100")
    assert "left (until" in answer.rows[0][5] and "restart your server to use them" in answer.note

    status = egs(shell, "status")
    assert [g.id for g in status.items] == [gpr.id]
    formatted, _ = shell.display_formatter.format(status)
    plain, rich = formatted["text/plain"], formatted["text/html"]
    assert plain.splitlines()[1].split() == ["ID", "slice", "by", "asks", "priority", "state", "GPUs", "held"]
    assert plain.splitlines()[2].split()[:3] == [str(gpr.id), team, name]
    assert "<table class='egs-table'>" in rich and f"<td style='text-align:left'>{team}</td>" in rich

    released = egs(shell, "release")
    assert released.title == f"Released GPR {gpr.id}" and released.items[0].end_reason == "released-early"
    assert admin.events(gpr=gpr.id)[-1].kind in ("released-early", "complete")
    wait_for(lambda: admin.gpr(gpr.id).status == "complete", 15, "the release")
    assert egs(shell, "status").note.startswith(f"No GPR in your slices ({team}) is waiting or running")


def test_wait_times_and_priority_bands(shell, admin, alice, capsys):
    team = new_slice(admin, alice, policy={"max_priority": 150, "max_active_gprs": 3})
    table = egs(shell, "wait-times 2 gpus for 1h")
    assert table.title == f"Wait times for 2 gpus for 1h in slice {team}"
    assert sorted(row[:2] for row in table.rows) == [("local", "A100-40GB x4"), ("local", "H100-80GB x8")]
    assert {(row[2], *row[4:]) for row in table.rows} == {("2", "now", "no price", "no price")} and table.note == ""

    assert egs(shell, "request 1 gpu for 5m --priority high") is None
    assert one_error_line(capsys).startswith("--priority high (201-300) is above your slice's max_priority 150")
    assert egs(shell, "request 1 gpu for 5m --priority medium --shape A100").items[0].priority == 101
    assert egs(shell, "request 1 gpu for 5m --priority 20 --shape A100").items[0].priority == 20
    later = datetime.now(UTC) + timedelta(hours=3)
    asked = egs(shell, f"request 1 node for 5m --shape A100 --start-after {later:%Y-%m-%dT%H:%M}Z").items[0]
    assert asked.status == "queued" and asked.start_after == later.replace(second=0, microsecond=0)
    assert asked.estimated_start >= asked.start_after


def test_templates_list_and_fill_requests(shell, admin, alice, capsys):
    team = new_slice(admin, alice)
    name = f"tpl-{team}"
    admin.create_template(name, "10m", gpus=1, shape="A100", slice=team, description="one A100")
    listed = egs(shell, "templates")
    assert listed.title == f"GPR templates slice {team} may use" and name in [t.name for t in listed.items]
    assert (name, "1 GPU", "10m", "A100", "any", f"slice {team}", "one A100") in listed.rows
    assert listed.note.startswith("Ask from one with %egs request --template ")

    admin.set_prices("local", {"A100-40GB x4": 1.5})
    try:
        table = egs(shell, f"wait-times --template {name}")
    finally:
        admin.set_prices("local", {})
    assert table.title == f"Wait times for template {name} in slice {team}"
    assert [(row[1], row[5], row[6]) for row in table.rows] == [("A100-40GB x4", "1.50", "0.25")]  # 1 GPU, 10 min
    later = datetime.now(UTC) + timedelta(hours=3)
    asked = egs(shell, f"request --template {name} for 5m --start-after {later:%Y-%m-%dT%H:%M}Z").items[0]
    assert (asked.template, asked.gpus, asked.shape, asked.duration) == (name, 1, "A100", timedelta(minutes=5))
    assert egs(shell, "request --template no-such-one") is None
    assert one_error_line(capsys).startswith("no template named 'no-such-one'")
    admin.delete_template(name)


def test_the_slice_comes_from_the_option_the_environment_or_membership(shell, admin, alice, monkeypatch, capsys):
    assert egs(shell, "wait-times 1 gpu for 1h") is None
    assert one_error_line(capsys) == "you are a member of no slice; ask an egs-hub admin to add you to one"
    first, second = new_slice(admin, alice), new_slice(admin, alice)
    assert egs(shell, "wait-times 1 gpu for 1h") is None
    listed = ", ".join(sorted([first, second]))
    assert one_error_line(capsys).startswith(f"you are a member of several slices ({listed})")
    assert egs(shell, f"wait-times 1 gpu for 1h --slice {second}").title.endswith(f"in slice {second}")
    monkeypatch.setenv("EGS_SLICE", first)
    assert egs(shell, "wait-times 1 gpu for 1h").title.endswith(f"in slice {first}")


def test_ctrl_c_stops_waiting_and_keeps_the_gpr(shell, admin, alice, capsys):
    holder = new_slice(admin, alice)
    team = new_slice(admin, alice)
    busy = admin.create_gpr(holder, "10m", nodes=1, shape="A100")
    wait_for(lambda: admin.gpr(busy.id).status == "provisioned", 15, "the A100 node to be held")
    queued = egs(shell, f"request 1 node for 5m --shape A100 --slice {team}").items[0]
    assert queued.status == "queued"

    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT)).start()
    answer = egs(shell, "wait")
    captured = capsys.readouterr()
    assert f"Stopped waiting; GPR {queued.id} is still queued and was not cancelled." in captured.out
    assert f"GPR {queued.id} queued #1, starts ~" in captured.err  # the progress bar
    assert answer.items[0].status == "queued" and admin.gpr(queued.id).status == "queued"

    cancelled = egs(shell, f"release {queued.id}")
    assert cancelled.title == f"Cancelled GPR {queued.id} (it held no GPUs yet)"
    assert cancelled.items[0].status == "cancelled"
    assert egs(shell, "wait") is None
    assert one_error_line(capsys).startswith("alice-")  # "<user> has no GPR that is pending-approval or ..."


def test_gpus_say_when_there_are_no_metrics(shell, admin, alice):
    team = new_slice(admin, alice)
    assert egs(shell, "gpus").note.startswith("No GPU metrics: ")
    held = egs(shell, "request 1 gpu for 5m --shape A100 --wait").items[0]
    table = egs(shell, "gpus")
    (row,) = table.rows
    assert row[0].startswith("a100-a:") and row[1] and row[2] == f"{team} (GPR {held.id})"
    assert row[3:] == ("", "", "", "") and table.items[0].uuid == held.bound_gpus[0]


def test_errors_are_one_line_without_a_traceback(shell, admin, alice, monkeypatch, capsys):
    new_slice(admin, alice)
    result = shell.run_cell("%egs request 2 gpus for 10m --shape Z80")
    assert result.success and result.result is None
    assert "Z80" in one_error_line(capsys)
    assert egs(shell, "request 2 gpus for 2 parsecs") is None
    assert one_error_line(capsys).startswith("the duration '2 parsecs' is not a duration")
    assert egs(shell, "release 999999") is None
    assert one_error_line(capsys) == "no GPR with id 999999"

    monkeypatch.setenv("EGS_API_TOKEN", "wrong")
    assert egs(shell, "status") is None
    assert one_error_line(capsys).startswith("not logged in: send a JupyterHub API token")
    monkeypatch.setenv("EGS_API_URL", f"http://127.0.0.1:{free_port()}/services/egs/api/v1/")
    assert egs(shell, "status") is None
    assert one_error_line(capsys).startswith("cannot reach the EGS service at http://127.0.0.1:")
    monkeypatch.delenv("EGS_API_URL")
    assert egs(shell, "gpus") is None
    assert one_error_line(capsys).startswith("no EGS service URL: pass url= or set EGS_API_URL")


def test_serve_a_command_and_list_endpoints(shell, hub, admin, alice):
    name, _ = alice
    team = new_slice(admin, alice)
    answer = egs(shell, f"serve --runtime command --name echo -- {sys.executable} {ENDPOINT_SERVER} {{port}}")
    (endpoint,) = answer.items
    assert endpoint.status == "ready" and endpoint.replicas == 1 and endpoint.created_by == name
    assert answer.title == f"Endpoint echo in slice {team}"
    url = f"{hub.url}/services/egs/endpoints/{team}/echo/"
    assert f"Its URL: {url}" in answer.note and "JUPYTERHUB_API_TOKEN" in answer.note
    served = requests.get(url + "v1/models", headers={"Authorization": f"token {os.environ['EGS_API_TOKEN']}"})
    assert served.status_code == 200 and served.json()["path"] == "/v1/models"
    (gpr,) = [g for g in admin.gprs(slice=team) if g.status == "provisioned"]
    assert served.json()["gprs"] == str(gpr.id) and gpr.requested_by == name

    listed = egs(shell, "endpoints")
    assert [(e.slice, e.name) for e in listed.items] == [(team, "echo")]
    assert listed.rows[0][2] == "ready" and listed.rows[0][3] == "1/1 (max 1)"
    admin.delete_endpoint(team, "echo")


class RecordingClient(EGSClient):
    """A real client that also keeps what it sent: (method, path, body) per call."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.sent: list[tuple[str, str, dict | None]] = []

    def _send(self, call):
        self.sent.append((call.method, call.path, call.body))
        return super()._send(call)


def test_serve_sends_the_cluster_and_image_and_says_why_it_is_refused(shell, admin, alice, capsys):
    team = new_slice(admin, alice)
    image = "registry.example/echo:1"
    line = f"serve --cluster nowhere --image {image} --name echo -- {sys.executable} {ENDPOINT_SERVER} {{port}}"
    magics = shell.magics_manager.registry["EGSMagics"]
    with RecordingClient() as client, pytest.raises(EGSError) as refused:
        magics.run_command(client, cmd.parse_command(line, NOW))
    (body,) = [body for method, path, body in client.sent if (method, path) == ("POST", "endpoints")]
    assert (body["slice"], body["name"], body["runtime"]) == (team, "echo", "command")
    assert (body["cluster"], body["image"]) == ("nowhere", image)
    assert refused.value.field == "cluster" and "'nowhere'" in refused.value.message

    assert egs(shell, line) is None  # the same, as the notebook shows it
    assert "'nowhere'" in one_error_line(capsys)
    assert admin.endpoints(team) == []


def test_help_documents_every_command(shell, capsys):
    assert egs(shell, "--help") is None
    out = capsys.readouterr().out
    commands = ("request", "wait-times", "templates", "status", "release [ID]", "wait [ID]", "gpus", "serve")
    commands += ("endpoints",)
    for command in (*commands, "--help"):
        assert f"%egs {command}" in out
    for option in ("--template", "--shape", "--priority", "--slice", "--start-after", "--wait", "--cluster", "--image"):
        assert option in out
    assert "--runtime vllm|kserve" in out
