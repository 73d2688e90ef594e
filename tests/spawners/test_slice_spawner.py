"""SliceLocalSpawner: picking the slice, asking the EGS service for its GPUs, starting with them.

The service is ``FakeEGS`` (fake_egs.py), an HTTP test double of the EGS REST
API v1 served on loopback, so the spawner's own HTTP client, URLs, headers and
error handling are what is tested.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from egs_hub.embedded import free_port
from egs_hub.spawners import SliceLocalSpawner

from .fake_egs import API, TOKEN, FakeEGS, Slice, serve_fake_egs

ALLOW_ROOT = "--ServerApp.allow_root=True"


@pytest.fixture
async def egs() -> AsyncIterator[FakeEGS]:
    async with serve_fake_egs() as fake:
        yield fake


def team(name: str, *members: str, gpus: tuple[str, ...] = (), gprs: tuple[int, ...] = (), display=None) -> Slice:
    """Slice ``name`` whose hub group is ``group-<name>``."""
    return Slice(name, set(members), gpus=list(gpus), gprs=list(gprs), display_name=display)


def make_spawner(
    egs_url: str, user: str = "alice", groups: tuple[str, ...] = (), name: str = "", **traits
) -> SliceLocalSpawner:
    """A spawner for ``user`` (in hub ``groups``), with just enough hub around it to start a process."""
    hub_user = SimpleNamespace(
        name=user, escaped_name=user, url=f"/user/{user}/", groups=[SimpleNamespace(name=g) for g in groups]
    )
    hub = SimpleNamespace(public_host="", api_url="http://127.0.0.1:8081/hub/api", base_url="/hub/")
    orm_spawner = SimpleNamespace(name=name, display_name=name, server=None)  # the server's name lives here
    traits.setdefault("egs_api_token", TOKEN)
    # servers run as the test's own user here (tests/security runs them as system accounts)
    traits.setdefault("isolation", "none")
    return SliceLocalSpawner(user=hub_user, hub=hub, orm_spawner=orm_spawner, egs_api_url=egs_url, **traits)


# --- resolve_slice -------------------------------------------------------------------------


@dataclass(frozen=True)
class ResolveCase:
    groups: tuple[str, ...]
    user_options: dict = field(default_factory=dict)
    want: str | None = None  # the slice resolved
    want_error: str | None = None  # or the error message
    want_asked: bool = True  # whether the service was asked for slices


RESOLVE_CASES = {
    "slice from user_options wins": ResolveCase(("group-a", "group-b"), {"slice": "b"}, want="b", want_asked=False),
    "the only slice": ResolveCase(("group-a", "other"), want="a"),
    "several slices: choose one": ResolveCase(
        ("group-a", "group-b"), want_error="alice is in several workspaces (a, b); choose one to start in"
    ),
    "no slice: no GPUs": ResolveCase(("other",), want=None),
    "no groups at all": ResolveCase((), want=None),
    "empty slice option counts as none": ResolveCase(("group-b",), {"slice": ""}, want="b"),
}


@pytest.mark.parametrize("case", RESOLVE_CASES.values(), ids=RESOLVE_CASES.keys())
async def test_resolve_slice(egs: FakeEGS, case: ResolveCase):
    egs.slices = [team("a", "alice"), team("b", "alice")]
    spawner = make_spawner(egs.url, groups=case.groups, user_options=case.user_options)

    if case.want_error is not None:
        with pytest.raises(RuntimeError, match=f"^{re.escape(case.want_error)}$"):
            await spawner.resolve_slice()
    else:
        assert await spawner.resolve_slice() == case.want
    assert egs.requests == ([("GET", "slices", None)] if case.want_asked else [])


# --- egs_environment -----------------------------------------------------------------------


@dataclass(frozen=True)
class EnvCase:
    user: str = "alice"
    groups: tuple[str, ...] = ("group-a",)
    server: str = ""
    user_options: dict = field(default_factory=dict)
    want_env: dict[str, str] = field(default_factory=dict)
    want_put: str | None = None  # raw path of the PUT, after the API prefix


GPUS = ("GPU-11111111-2222-3333-4444-555555555555", "GPU-66666666-7777-8888-9999-000000000000")
ENV_CASES = {
    "slice with two GPUs": EnvCase(
        want_env={"CUDA_VISIBLE_DEVICES": ",".join(GPUS), "EGS_SLICE": "a", "EGS_GPRS": "3,5"},
        want_put="servers/alice",
    ),
    "named server, quoted": EnvCase(
        server="big run",
        want_env={"CUDA_VISIBLE_DEVICES": ",".join(GPUS), "EGS_SLICE": "a", "EGS_GPRS": "3,5"},
        want_put="servers/alice/big%20run",
    ),
    "user name with @, quoted": EnvCase(
        user="bob@lab.org",
        want_env={"CUDA_VISIBLE_DEVICES": ",".join(GPUS), "EGS_SLICE": "a", "EGS_GPRS": "3,5"},
        want_put="servers/bob%40lab.org",
    ),
    "slice holding no GPUs now": EnvCase(
        groups=("group-idle",),
        want_env={"CUDA_VISIBLE_DEVICES": "", "EGS_SLICE": "idle", "EGS_GPRS": ""},
        want_put="servers/alice",
    ),
    "chosen in the form among several": EnvCase(
        groups=("group-a", "group-idle"),
        user_options={"slice": "idle"},
        want_env={"CUDA_VISIBLE_DEVICES": "", "EGS_SLICE": "idle", "EGS_GPRS": ""},
        want_put="servers/alice",
    ),
    "in no slice: no GPUs, nothing registered": EnvCase(
        groups=("other",), want_env={"CUDA_VISIBLE_DEVICES": "", "EGS_SLICE": ""}
    ),
}


@pytest.mark.parametrize("case", ENV_CASES.values(), ids=ENV_CASES.keys())
async def test_egs_environment(egs: FakeEGS, case: EnvCase):
    egs.slices = [team("a", "alice", "bob@lab.org", gpus=GPUS, gprs=(3, 5)), team("idle", "alice")]
    spawner = make_spawner(egs.url, case.user, case.groups, case.server, user_options=case.user_options)

    assert await spawner.egs_environment() == case.want_env
    puts = [(path, body) for method, path, body in egs.requests if method == "PUT"]
    if case.want_put is None:
        assert puts == []
    else:
        assert puts == [(case.want_put, {"slice": case.want_env["EGS_SLICE"]})]


@dataclass(frozen=True)
class ErrorCase:
    user_options: dict = field(default_factory=dict)
    fail_with: tuple[int, str] | None = None
    token: str = TOKEN
    want: str = ""  # the whole error message


ERROR_CASES = {
    "not a member of the chosen slice": ErrorCase(
        {"slice": "a"}, want="egs-hub service answered 403: alice is not a member of slice 'a'"
    ),
    "unknown slice": ErrorCase({"slice": "gone"}, want="egs-hub service answered 404: No slice named 'gone'"),
    "wrong token": ErrorCase(token="stale", want="egs-hub service answered 403: a hub token is needed"),
    "service error without JSON": ErrorCase(
        fail_with=(500, "<html>oops</html>"), want="egs-hub service answered 500: Internal Server Error"
    ),
}


@pytest.mark.parametrize("case", ERROR_CASES.values(), ids=ERROR_CASES.keys())
async def test_service_errors_carry_its_message(egs: FakeEGS, case: ErrorCase):
    egs.slices = [team("a", "bob"), team("b", "alice")]
    egs.fail_with = case.fail_with
    spawner = make_spawner(egs.url, groups=("group-b",), user_options=case.user_options, egs_api_token=case.token)

    with pytest.raises(RuntimeError) as raised:
        await spawner.egs_environment()
    assert str(raised.value) == case.want


async def test_unreachable_service_fails_the_start_before_any_process(tmp_path):
    url = f"http://127.0.0.1:{free_port()}{API}"
    spawner = make_spawner(url, groups=("group-a",), cmd=[sys.executable, "-c", "pass"])

    with pytest.raises(RuntimeError) as raised:
        await spawner.start()

    message = str(raised.value)
    assert message.startswith(f"egs-hub service at {url} is unreachable (")
    assert "the server cannot start without knowing its GPUs. Try again shortly." in message
    assert spawner.proc is None and spawner.pid == 0


# --- the spawn form ------------------------------------------------------------------------

FORM_CASES = {
    # name: (user's groups, wanted <option> elements; None means no form, [] a GPU count only)
    "no slice: no form": ((), None),
    "one slice: it is chosen, the form asks the GPUs": (("group-a",), []),
    "two slices: a choice": (
        ("group-a", "group-b"),
        ['<option value="a">Team A</option>', '<option value="b">b</option>'],
    ),
    "names escaped": (
        ("group-a", "group-x"),
        ['<option value="a">Team A</option>', '<option value="x&amp;y">R&amp;D &lt;GPU&gt;</option>'],
    ),
}


@pytest.mark.parametrize(("groups", "want_options"), FORM_CASES.values(), ids=FORM_CASES.keys())
async def test_options_form_lists_slices_only_when_there_is_a_choice(egs: FakeEGS, groups, want_options):
    egs.slices = [
        team("a", display="Team A"),
        team("b"),
        Slice("x&y", set(), display_name="R&D <GPU>", group_name="group-x"),
    ]

    form = await make_spawner(egs.url, groups=groups, egs_default_gpus=2, egs_max_gpus=4).get_options_form()

    if want_options is None:
        assert form == ""
        return
    count = '<input id="egs-gpus" name="gpus" type="number" min="0" max="4" step="1" value="2">'
    assert form.endswith(count)
    if not want_options:
        assert "<select" not in form
    else:
        assert form.startswith('<label for="egs-slice">Workspace</label><select id="egs-slice" name="slice">')
        assert form.count("<option") == len(want_options)
        assert all(option in form for option in want_options)


def test_form_data_becomes_user_options():
    spawner = make_spawner("http://127.0.0.1:1/")

    assert spawner.run_options_from_form({"slice": ["b"], "gpus": ["1"]}) == {"slice": "b", "gpus": "1"}
    assert spawner.run_options_from_form({}) == {}


# --- the process ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [[], ["--debug", "--ServerApp.log_level=INFO"]],
    ids=["no configured args", "configured args kept first"],
)
def test_get_args_allows_root_only_as_root_and_does_not_grow(args: list[str]):
    spawner = make_spawner("http://127.0.0.1:1/", args=list(args))
    want = [*args, ALLOW_ROOT] if os.geteuid() == 0 else args

    assert spawner.get_args() == want
    assert spawner.get_args() == want  # every start asks again
    assert spawner.args == args


REPORT_ENV = """
import json, os, sys
keys = ["CUDA_VISIBLE_DEVICES", "EGS_SLICE", "EGS_GPRS", "JUPYTERHUB_USER", "HOME"]
report = {"env": {k: os.environ.get(k) for k in keys}, "argv": sys.argv[2:], "cwd": os.getcwd()}
with open(sys.argv[1] + ".tmp", "w") as f:
    json.dump(report, f)
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
"""

START_CASES = {
    # name: (user's groups, wanted CUDA_VISIBLE_DEVICES, EGS_SLICE, EGS_GPRS)
    "in a slice with GPUs": (("group-a",), ",".join(GPUS), "a", "3,5"),
    "in no slice": ((), "", "", None),
}


@pytest.mark.parametrize(("groups", "want_cuda", "want_slice", "want_gprs"), START_CASES.values(), ids=START_CASES)
async def test_start_runs_the_server_with_the_slice_gpus_and_stop_forgets_it(
    egs: FakeEGS, tmp_path, groups, want_cuda, want_slice, want_gprs
):
    egs.slices = [team("a", "alice", gpus=GPUS, gprs=(3, 5))]
    report = tmp_path / "report.json"
    spawner = make_spawner(
        egs.url,
        groups=groups,
        name="gpu",
        cmd=[sys.executable, "-c", REPORT_ENV, str(report)],
        home_dir_template=str(tmp_path / "home" / "{username}"),
    )

    await spawner.start()
    for _ in range(200):
        if report.exists():
            break
        await asyncio.sleep(0.025)
    await spawner.stop()

    seen = json.loads(report.read_text())
    assert seen["env"] == {
        "CUDA_VISIBLE_DEVICES": want_cuda,
        "EGS_SLICE": want_slice,
        "EGS_GPRS": want_gprs,
        "JUPYTERHUB_USER": "alice",
        "HOME": str(tmp_path / "home" / "alice"),
    }
    assert seen["cwd"] == str(tmp_path / "home" / "alice")
    assert seen["argv"] == ([ALLOW_ROOT] if os.geteuid() == 0 else [])
    assert egs.requests[-1] == ("DELETE", "servers/alice/gpu", None)


async def test_stop_with_the_service_down_only_warns(caplog):
    url = f"http://127.0.0.1:{free_port()}{API}"
    spawner = make_spawner(url, name="gpu", log=logging.getLogger("test-spawner"))

    with caplog.at_level(logging.WARNING, logger="test-spawner"):
        await spawner.forget_server()

    assert any(
        r.getMessage().startswith("could not tell egs-hub that alice's server stopped: egs-hub service at")
        for r in caplog.records
    )
