"""The ``%egs`` line magic: ask for GPUs, wait for them, watch them and release them from a notebook.

``%load_ext egs_hub`` registers it; ``%egs --help`` lists the commands
(magic_commands.py parses them). Answers are tables (tables.py) that render as
HTML in notebooks and as text in terminals; errors, from the line or from the
service, are one line on stderr. The service and token come from the
environment (``EGS_API_URL``, ``EGS_API_TOKEN`` or ``JUPYTERHUB_API_TOKEN``),
the default slice from ``EGS_SLICE``, the user from ``JUPYTERHUB_USER``.
"""

from __future__ import annotations

import os
import sys
import time
from datetime import datetime

from IPython.core.magic import Magics, line_magic, magics_class
from tqdm.auto import tqdm
from traitlets import Float

from ..client import GPR, EGSClient, EGSError, Endpoint
from . import magic_commands as cmd
from .tables import (
    LIVE,
    WAITING,
    Table,
    describe_endpoint,
    describe_state,
    endpoints_table,
    gpr_table,
    gpus_table,
    templates_table,
    wait_times_table,
)

ENDED = ("releasing", "complete", "rejected", "cancelled", "failed")
RELEASABLE = ("pending-approval", "queued", "provisioning", "provisioned")
AWAITED = ("pending-approval", "queued", "provisioning")


def local_now() -> datetime:
    return datetime.now().astimezone()


@magics_class
class EGSMagics(Magics):
    poll_interval = Float(
        2.0,
        help="Seconds between looks at a GPR while %egs wait (or request --wait) waits for it.",
    ).tag(config=True)

    @line_magic
    def egs(self, line: str) -> Table | None:
        """Ask for GPUs and watch them (egs-hub); %egs --help lists the commands."""
        try:
            command = cmd.parse_command(line, local_now())
            if isinstance(command, cmd.Help):
                print(cmd.HELP)
                return None
            with EGSClient() as client:
                return self.run_command(client, command)
        except (cmd.CommandError, EGSError) as e:
            print(f"egs: {e}", file=sys.stderr)
            return None

    def run_command(self, client: EGSClient, command: cmd.Command) -> Table | None:
        match command:
            case cmd.Request(ask, wait):
                return self.request(client, ask, wait)
            case cmd.WaitTimes(ask):
                return self.wait_times(client, ask)
            case cmd.Status():
                return self.status(client)
            case cmd.Release(gpr_id):
                return self.release(client, gpr_id)
            case cmd.Wait(gpr_id):
                return self.wait(client, gpr_id)
            case cmd.Gpus():
                return gpus_table(client.gpus(sort="temperature"), "GPUs of your slices, hottest first")
            case cmd.Templates(slice_name):
                return self.templates(client, slice_name)
            case cmd.Serve():
                return self.serve(client, command)
            case cmd.Endpoints(slice_name):
                slices = [self.slice_for(client, slice_name)] if slice_name else None
                found = client.endpoints(slices[0]) if slices else client.endpoints()
                return endpoints_table(found, local_now(), "Endpoints of your slices")
        raise TypeError(f"no handler for {command!r}")

    # commands

    def request(self, client: EGSClient, ask: cmd.Ask, wait: bool) -> Table:
        slice_name = self.slice_for(client, ask.slice)
        gpr = client.create_gpr(slice_name, **self.ask_fields(client, slice_name, ask))
        if wait and gpr.status != "provisioned":
            gpr = self.wait_until_provisioned(client, gpr) or client.gpr(gpr.id)
        return self.gpr_answer(gpr, f"GPR {gpr.id} in slice {slice_name}")

    def wait_times(self, client: EGSClient, ask: cmd.Ask) -> Table:
        slice_name = self.slice_for(client, ask.slice)
        answer = client.wait_times(slice_name, **self.ask_fields(client, slice_name, ask))
        return wait_times_table(answer, local_now(), f"Wait times for {cmd.describe(ask)} in slice {slice_name}")

    def templates(self, client: EGSClient, given: str | None) -> Table:
        slice_name = self.slice_for(client, given)
        return templates_table(client.templates(slice=slice_name), f"GPR templates slice {slice_name} may use")

    def status(self, client: EGSClient) -> Table:
        live = sorted((g for g in client.gprs() if g.status in LIVE), key=lambda g: g.id)
        if live:
            return gpr_table(live, local_now(), "GPRs of your slices that are not finished")
        names = ", ".join(s.name for s in client.slices()) or "none"
        note = f"No GPR in your slices ({names}) is waiting or running; ask with %egs request 2 gpus for 2h"
        return gpr_table([], local_now(), "", note)

    def release(self, client: EGSClient, gpr_id: int | None) -> Table:
        gpr = client.gpr(gpr_id) if gpr_id else self.my_gpr(client, RELEASABLE, "release")
        if gpr.status in WAITING:
            done = client.cancel_gpr(gpr.id, "cancelled with %egs release")
            return self.gpr_answer(done, f"Cancelled GPR {gpr.id} (it held no GPUs yet)")
        done = client.release_gpr(gpr.id, "released with %egs release")
        return self.gpr_answer(done, f"Released GPR {gpr.id}")

    def wait(self, client: EGSClient, gpr_id: int | None) -> Table:
        gpr = client.gpr(gpr_id) if gpr_id else self.my_gpr(client, AWAITED, "wait")
        provisioned = self.wait_until_provisioned(client, gpr)
        return self.gpr_answer(provisioned or client.gpr(gpr.id), f"GPR {gpr.id} in slice {gpr.slice}")

    def serve(self, client: EGSClient, serve: cmd.Serve) -> Table:
        """Make the endpoint (it starts one replica), wait until it is ready, and say its URL and how to
        call it."""
        slice_name = self.slice_for(client, serve.slice)
        model = os.path.abspath(serve.model) if serve.model and os.path.exists(serve.model) else serve.model
        endpoint = client.create_endpoint(
            slice_name,
            serve.name,
            serve.runtime,
            model=model or None,
            gpus=serve.gpus,
            cluster=serve.cluster,
            command=list(serve.command) or None,
            image=serve.image,
            min_replicas=serve.min_replicas,
            max_replicas=serve.max_replicas,
            idle_timeout=serve.idle_timeout,
        )
        if serve.wait:
            endpoint = self.wait_until_ready(client, endpoint)
        base = client.url.split("/services/", 1)[0] if "/services/" in client.url else client.url.rstrip("/")
        note = endpoint_snippet(endpoint, base)
        return endpoints_table([endpoint], local_now(), f"Endpoint {endpoint.name} in slice {slice_name}", note)

    def wait_until_ready(self, client: EGSClient, endpoint: Endpoint) -> Endpoint:
        """Poll until a replica of ``endpoint`` is ready, with a progress bar; Ctrl-C stops waiting (the
        endpoint stays). A failed endpoint is a CommandError saying why."""
        bar = tqdm(total=100, bar_format="{desc} |{bar}| {elapsed}", leave=True)
        try:
            while endpoint.status != "ready":
                if endpoint.status == "failed":
                    raise cmd.CommandError(f"endpoint {endpoint.name} failed: {endpoint.message}")
                bar.set_description_str(f"Endpoint {endpoint.name}: {describe_endpoint(endpoint, local_now())}")
                bar.n = {"pending": 10, "starting": 60}.get(endpoint.status, 0)
                bar.refresh()
                time.sleep(self.poll_interval)
                endpoint = client.endpoint(endpoint.slice, endpoint.name)
            bar.set_description_str(f"Endpoint {endpoint.name} is ready")
            bar.n = 100
            return endpoint
        except KeyboardInterrupt:
            print(f"Stopped waiting; endpoint {endpoint.name} is {endpoint.status} and stays. %egs endpoints shows it.")
            return endpoint
        finally:
            bar.close()

    # helpers

    def slice_for(self, client: EGSClient, given: str | None) -> str:
        environment = os.environ.get("EGS_SLICE")
        member_of = None if given or environment else [s.name for s in client.slices()]
        return cmd.choose_slice(given, environment, member_of)

    def ask_fields(self, client: EGSClient, slice_name: str, ask: cmd.Ask) -> dict:
        priority = ask.priority
        if isinstance(priority, str):
            priority = cmd.band_priority(priority, client.slice(slice_name).policy.max_priority)
        size = {ask.unit: ask.count} if ask.unit else {}
        if ask.share is not None:
            size = {"gpu_share": ask.share}
        return {
            **size,
            "duration": ask.duration,
            "template": ask.template,
            "shape": ask.shape,
            "priority": priority,
            "start_after": ask.start_after,
        }

    def my_gpr(self, client: EGSClient, statuses: tuple[str, ...], command: str) -> GPR:
        return cmd.pick_gpr(client.gprs(), statuses, os.environ.get("JUPYTERHUB_USER"), command)

    def gpr_answer(self, gpr: GPR, title: str) -> Table:
        note = ""
        if gpr.status == "provisioned":
            note = (
                f"{len(gpr.bound_gpus)} GPU(s) on {', '.join(gpr.bound_nodes)} are yours until "
                f"{gpr.window_end.astimezone():%H:%M}; restart your server to use them."
            )
        return gpr_table([gpr], local_now(), title, note)

    def wait_until_provisioned(self, client: EGSClient, gpr: GPR) -> GPR | None:
        """Poll until ``gpr`` is provisioned (returned), with a progress bar towards its estimated start.

        Ctrl-C stops waiting and leaves the GPR as it is (None is returned). A GPR that ends
        before it is provisioned is a CommandError naming its status.
        """
        started = time.monotonic()
        bar = tqdm(total=100, bar_format="{desc} |{bar}| {elapsed}", leave=True)
        try:
            while gpr.status != "provisioned":
                if gpr.status in ENDED:
                    reason = gpr.end_reason or gpr.status_reason
                    raise cmd.CommandError(
                        f"GPR {gpr.id} is {gpr.status}{f' ({reason})' if reason else ''}; it will not be provisioned"
                    )
                self.show_progress(bar, gpr, time.monotonic() - started)
                time.sleep(self.poll_interval)
                gpr = client.gpr(gpr.id)
            bar.set_description_str(f"GPR {gpr.id} provisioned")
            bar.n = 100
            return gpr
        except KeyboardInterrupt:
            print(
                f"Stopped waiting; GPR {gpr.id} is still {gpr.status} and was not cancelled. "
                f"%egs wait {gpr.id} waits again, %egs release {gpr.id} ends it."
            )
            return None
        finally:
            bar.close()

    @staticmethod
    def show_progress(bar: tqdm, gpr: GPR, waited: float) -> None:
        """The bar's share is the time waited of the time waited plus the estimated wait left."""
        now = local_now()
        bar.set_description_str(f"GPR {gpr.id} {describe_state(gpr, now)}", refresh=False)
        if gpr.estimated_start is not None:
            left = max((gpr.estimated_start - now).total_seconds(), 0.0)
            bar.n = min(99, int(100 * waited / (waited + left))) if waited + left > 0 else 99
        bar.refresh()


def endpoint_snippet(endpoint: Endpoint, hub_url: str) -> str:
    """How to call ``endpoint`` from Python with the notebook's hub token: the ``openai`` client for vllm
    (``v1``, the model id) and kserve (KServe's Hugging Face runtime: ``openai/v1``, the model under the
    endpoint's name), a plain request for a command's server."""
    url = hub_url + endpoint.url
    if endpoint.runtime in ("vllm", "kserve"):
        base_url, model = url + "v1", endpoint.model
        if endpoint.runtime == "kserve":
            base_url, model = url + "openai/v1", endpoint.name
        return (
            f"Its URL: {url} (send a hub token). From Python:\n"
            "  import os; from openai import OpenAI\n"
            f'  llm = OpenAI(base_url="{base_url}", api_key=os.environ["JUPYTERHUB_API_TOKEN"])\n'
            f'  llm.chat.completions.create(model="{model}", messages=[{{"role": "user", "content": "Hi"}}])'
        )
    return (
        f"Its URL: {url} (send a hub token). From Python:\n"
        "  import os, requests\n"
        f'  requests.get("{url}", headers={{"Authorization": "token " + os.environ["JUPYTERHUB_API_TOKEN"]}})'
    )
