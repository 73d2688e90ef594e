"""What every slice spawner does: pick the slice, ask the EGS service for its GPUs.

A server belongs to one slice: the one in ``user_options["slice"]`` (from the
spawn form or the hub API), else the user's only slice. At start the spawner
registers the server with the service, which answers the GPU UUIDs the slice
may use now and remembers that this server holds them; at stop it forgets it.
The service is the authority: if it cannot be reached, the server does not
start, rather than start with the wrong GPUs.
"""

from __future__ import annotations

import contextlib
import html
import json
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from traitlets import HasTraits, Unicode, default


def _single_values(form_data: dict[str, list[str]]) -> dict:
    """The spawn form's fields with one value each unpacked from its list (``slice``)."""
    return {key: values[0] if len(values) == 1 else values for key, values in form_data.items()}


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
        slices = await self.user_slices()
        return slice_select(slices) if len(slices) > 1 else ""

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

    async def egs_environment(self) -> dict[str, str]:
        """CUDA_VISIBLE_DEVICES and EGS_* for the slice this server starts in."""
        slice_name = await self.resolve_slice()
        if slice_name is None:
            self.log.info("%s is in no workspace: starting without GPUs", self.user.name)
            return {"CUDA_VISIBLE_DEVICES": "", "EGS_SLICE": ""}
        granted = await self.register_server(slice_name)
        self.log.info(
            "%s's server %r starts in slice %s with GPUs %s",
            self.user.name,
            self.name,
            slice_name,
            granted["gpus"],
        )
        return {
            "CUDA_VISIBLE_DEVICES": ",".join(granted["gpus"]),
            "EGS_SLICE": slice_name,
            "EGS_GPRS": ",".join(map(str, granted["gprs"])),
        }

    async def register_server(self, slice_name: str) -> dict:
        """Tell the service this server starts in the slice; it answers ``gpus`` (ids) and ``gprs`` it may use."""
        return await self._egs("PUT", self._server_path(), {"slice": slice_name})

    async def forget_server(self) -> None:
        try:
            await self._egs("DELETE", self._server_path())
        except RuntimeError as e:
            self.log.warning("could not tell egs-hub that %s's server stopped: %s", self.user.name, e)
