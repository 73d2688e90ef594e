"""What every slice spawner does: pick the slice, ask the EGS service for its GPUs.

A server belongs to one slice: the one in ``user_options["slice"]`` (from the
spawn form or the hub API), else the user's only slice. At start the spawner
registers the server with the service, which answers the GPU UUIDs the slice
may use now and remembers that this server holds them; at stop it forgets it.
The service is the authority: if it cannot be reached, the server does not
start, rather than start with the wrong GPUs.

The spawn form asks for a GPU count (``user_options["gpus"]``). A start asking
for GPUs the slice does not hold gets a GPR filed from the template its policy
names (``auto_gpr``; service/auto_gpr.py), or waits for one the slice has queued.
When that GPR is estimated to start within ``egs_gpu_wait`` seconds the start
waits for it, and the spawn progress page says its place in the queue and its
estimated start as it goes; else the server starts without GPUs, and gets them
when the window opens (restarted by the slice's ``restart_servers`` policy, or
told to restart).
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from traitlets import HasTraits, Integer, Unicode, default


def _single_values(form_data: dict[str, list[str]]) -> dict:
    """The spawn form's fields with one value each unpacked from its list (``slice``)."""
    return {key: values[0] if len(values) == 1 else values for key, values in form_data.items()}


def requested_gpus(value: object) -> int | None:
    """The GPU count of ``user_options["gpus"]``: absent is None (not asked), empty 0; a whole number 0 or more."""
    if value is None:
        return None
    if value == "":
        return 0
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"gpus must be a whole number of GPUs (0 or more), not {value!r}")
    text = str(value).strip()
    if not text.isdigit():
        raise ValueError(f"gpus must be a whole number of GPUs (0 or more), not {value!r}")
    return int(text)


def options_form(slices: list[dict], default_gpus: int, max_gpus: int) -> str:
    """The spawn form: the workspace (when the user has a choice) and a GPU count, which starts at the
    GPUs a workspace of the user holds now (the most of them), else ``default_gpus``; none in no slice."""
    if not slices:
        return ""
    gpus = max((len(s.get("gpus") or ()) for s in slices), default=0) or default_gpus
    max_gpus = max(max_gpus, gpus)
    count = (
        '<label for="egs-gpus">GPUs</label>'
        f'<input id="egs-gpus" name="gpus" type="number" min="0" max="{max_gpus}" step="1" value="{gpus}">'
    )
    return (slice_select(slices) if len(slices) > 1 else "") + count


def parse_time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def queue_notice(position: int | None, estimated_start: str | None) -> str:
    where = f"position {position} in the queue" if position else "in the queue"
    when = f"estimated to start at {estimated_start}" if estimated_start else "no start estimated yet"
    return f"{where}, {when}"


def auto_gpr_notice(auto: dict) -> str:
    """What the spawn progress says of the GPR a start waits for (ServerRegistration's ``auto_gpr``)."""
    what = f"GPR {auto['id']}" + (f" (template {auto['template']})" if auto.get("template") else "")
    how = "was filed for your GPUs" if auto["filed"] else "of your workspace is waiting for GPUs"
    if auto["status"] == "pending-approval":
        return f"{what} {how}; it waits for an admin's approval."
    if auto["status"] != "queued":
        return f"{what} {how}; it is {auto['status']}."
    return f"{what} {how}: {queue_notice(auto.get('position'), auto.get('estimated_start'))}."


def starts_within(auto: dict, seconds: float, now: datetime) -> bool:
    """Whether the queued GPR ``auto`` is estimated to start within ``seconds`` of ``now``."""
    start = auto.get("estimated_start")
    return auto["status"] == "queued" and start is not None and (parse_time(start) - now).total_seconds() <= seconds


def slice_select(slices: list[dict]) -> str:
    """The spawn form's workspace choice: one ``<option>`` per slice, names escaped."""
    options = "".join(
        f'<option value="{html.escape(s["name"])}">{html.escape(s["display_name"] or s["name"])}</option>'
        for s in slices
    )
    return f'<label for="egs-slice">Workspace</label><select id="egs-slice" name="slice">{options}</select>'


class SliceSpawnerMixin(HasTraits):
    egs_api_url = Unicode(
        help="""URL of the EGS REST API v1 as the hub reaches it,
        e.g. http://127.0.0.1:10101/services/egs/api/v1/. egs-hub up sets it.

        .. versionadded:: 0.1
        """,
    ).tag(config=True)

    egs_api_token = Unicode(
        help="""Token the spawner sends to the EGS service: the service's own hub API token,
        which the service treats as itself. egs-hub up sets it.

        .. versionadded:: 0.1
        """,
    ).tag(config=True)

    egs_default_gpus = Integer(1, help="GPU count the spawn form starts with.").tag(config=True)
    egs_max_gpus = Integer(8, help="Largest GPU count the spawn form offers.").tag(config=True)

    egs_gpu_wait = Integer(
        45,
        help="""Seconds a start that asked for GPUs waits for the GPR it gets (the slice's auto_gpr, or
        one it has queued) when that GPR is estimated to start that soon; a later one lets the server
        start without GPUs. The wait is kept 15 s under start_timeout.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    def _egs_start_notes(self) -> None:
        """Forget the last start's notes (egs_note)."""
        self._egs_notes: list[str] = []
        self._egs_noted = asyncio.Event()

    @default("options_from_form")
    def _egs_options_from_form(self):
        # Not "simple": a dynamic default skips Spawner's @validate that turns that name
        # into a function, and JupyterHub would call the string.
        return _single_values

    async def _egs(self, method: str, path: str, body: dict | None = None) -> dict | None:
        request = HTTPRequest(
            self.egs_api_url.rstrip("/") + "/" + path,
            method=method,
            headers={"Authorization": f"token {self.egs_api_token}", "Content-Type": "application/json"},
            body=None if body is None else json.dumps(body),
            request_timeout=20,
        )
        try:
            response = await AsyncHTTPClient().fetch(request)
        except HTTPClientError as e:
            if e.code == 599:  # tornado's code for "no answer": timeout or connection reset
                raise RuntimeError(
                    f"egs-hub service at {self.egs_api_url} did not answer ({e.message}); "
                    "the server cannot start without knowing its GPUs. Try again shortly."
                ) from None
            message = e.message
            if e.response is not None and e.response.body:
                with contextlib.suppress(ValueError):
                    message = json.loads(e.response.body).get("message", message)
            raise RuntimeError(f"egs-hub service answered {e.code}: {message}") from None
        except OSError as e:
            raise RuntimeError(
                f"egs-hub service at {self.egs_api_url} is unreachable ({e}); "
                "the server cannot start without knowing its GPUs. Try again shortly."
            ) from None
        return json.loads(response.body) if response.body else None

    async def user_slices(self) -> list[dict]:
        """The slices whose hub group the user is in, by name."""
        groups = {g.name for g in self.user.groups}
        slices = (await self._egs("GET", "slices"))["slices"]
        return [s for s in slices if s["group"] in groups]

    async def _egs_options_form(self) -> str:
        return options_form(await self.user_slices(), self.egs_default_gpus, self.egs_max_gpus)

    @default("options_form")
    def _default_options_form(self):
        return lambda spawner: spawner._egs_options_form()

    def _server_path(self) -> str:
        user = quote(self.user.name, safe="")
        return f"servers/{user}/{quote(self.name, safe='')}" if self.name else f"servers/{user}"

    async def resolve_slice(self) -> str | None:
        wanted = (self.user_options or {}).get("slice")
        if wanted:
            return str(wanted)
        slices = await self.user_slices()
        if len(slices) > 1:
            names = ", ".join(s["name"] for s in slices)
            raise RuntimeError(f"{self.user.name} is in several workspaces ({names}); choose one to start in")
        return slices[0]["name"] if slices else None

    async def register_server(self, slice_name: str, gpus: int | None = None, cluster: str | None = None) -> dict:
        """Tell the service this server starts in the slice (asking ``gpus`` on ``cluster``, None: this host);
        it answers ``gpus`` (ids) and ``gprs`` it may use, and ``auto_gpr`` when it waits for one."""
        body: dict = {"slice": slice_name}
        if gpus is not None:
            body["gpus"] = gpus
        if cluster is not None:
            body["cluster"] = cluster
        return await self._egs("PUT", self._server_path(), body)

    async def egs_environment(self) -> dict[str, str]:
        """CUDA_VISIBLE_DEVICES and EGS_* for the slice this server starts in on this host: its GPUs, the
        first ``gpus`` of them when the form asked a count (all when the start did not say)."""
        wanted = requested_gpus((self.user_options or {}).get("gpus"))
        slice_name = await self.resolve_slice()
        if slice_name is None:
            self.egs_note(f"{self.user.name} is in no workspace: starting without GPUs.")
            return {"CUDA_VISIBLE_DEVICES": "", "EGS_SLICE": ""}
        granted = await self.egs_grant(slice_name, wanted, None, lambda answer: answer["gpus"])
        gpus = granted["gpus"] if wanted is None else granted["gpus"][:wanted]
        self.egs_note(f"Starting in workspace {slice_name} with {len(gpus)} GPU(s): {', '.join(gpus) or 'none'}.")
        return {
            "CUDA_VISIBLE_DEVICES": ",".join(gpus),
            "EGS_SLICE": slice_name,
            "EGS_GPRS": ",".join(map(str, granted["gprs"])),
        }

    def egs_note(self, message: str) -> None:
        """Say ``message`` on the spawn progress page (egs_progress)."""
        self.log.info("%s's server %r: %s", self.user.name, self.name, message)
        self._egs_notes.append(message)
        self._egs_noted.set()

    async def egs_progress(self, preparation: asyncio.Future | None):
        """The notes (egs_note) as progress events, as they come, until ``preparation`` is done."""
        sent = 0
        while True:
            self._egs_noted.clear()
            while sent < len(self._egs_notes):
                yield {"progress": min(5 + 5 * sent, 50), "message": self._egs_notes[sent]}
                sent += 1
            if preparation is None or preparation.done():
                return
            noted = asyncio.ensure_future(self._egs_noted.wait())
            await asyncio.wait([noted, preparation], return_when=asyncio.FIRST_COMPLETED)
            noted.cancel()

    async def egs_grant(
        self, slice_name: str, wanted: int | None, cluster: str | None, held_on: Callable[[dict], list[str]]
    ) -> dict:
        """Register the server asking ``wanted`` GPUs on ``cluster`` (None: this host); when it holds none
        (``held_on`` picks the usable ones from an answer) and waits for a GPR estimated to start within
        egs_gpu_wait, wait for it and register again. The service's last answer."""
        granted = await self.register_server(slice_name, wanted, cluster)
        if not wanted or held_on(granted):
            return granted
        if granted.get("auto_gpr_problem"):
            self.egs_note(granted["auto_gpr_problem"])
        auto = granted.get("auto_gpr")
        if auto is None:
            return granted
        self.egs_note(auto_gpr_notice(auto))
        wait = min(self.egs_gpu_wait, max(self.start_timeout - 15, 0))
        deadline = time.monotonic() + wait
        later = (
            "The server starts without GPUs now and gets them when the GPR's window opens "
            "(restarted then if the workspace's policy says so; else restart it)."
        )
        if not starts_within(auto, wait, datetime.now(UTC)):
            self.egs_note(later)
            return granted
        gpr = await self._wait_for_gpr(auto["id"], deadline)
        if gpr is None or gpr["status"] not in ("provisioning", "provisioned"):
            self.egs_note(later)
            return granted
        self.egs_note(f"GPR {auto['id']} holds GPUs now.")
        return await self.register_server(slice_name, wanted, cluster)

    async def _wait_for_gpr(self, gpr_id: int, deadline: float) -> dict | None:
        """GPR ``gpr_id`` once it holds GPUs, ends or waits for approval, polled each second until ``deadline``;
        None when the deadline came first. Each change of its place or estimate is a note."""
        said = None
        while time.monotonic() < deadline:
            gpr = await self._egs("GET", f"gprs/{gpr_id}")
            if gpr["status"] != "queued":
                return gpr
            now = (gpr.get("queue_position"), gpr.get("estimated_start"))
            if said is not None and now != said:
                self.egs_note(f"GPR {gpr_id}: {queue_notice(*now)}.")
            said = now
            await asyncio.sleep(1)
        return None

    async def forget_server(self) -> None:
        try:
            await self._egs("DELETE", self._server_path())
        except RuntimeError as e:
            self.log.warning("could not tell egs-hub that %s's server stopped: %s", self.user.name, e)
