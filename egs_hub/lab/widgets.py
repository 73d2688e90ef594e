"""ipywidgets for a notebook: ``RequestForm`` asks for GPUs, ``GpuMonitor`` watches them.

Vocabulary: an *option* is one row of the wait-time table (a shape on a cluster
with its estimated start); the form submits the picked option. Both widgets talk
to the service through an ``EGSClient`` (by default from the environment, as the
%egs magic does) and show its errors as a message instead of raising.
"""

from __future__ import annotations

import html
import os
import threading
from datetime import datetime

import ipywidgets as widgets

from ..client import GPR, EGSClient, EGSError, GPUs, WaitTimeOption
from . import magic_commands as cmd
from .tables import format_local, format_span, gpr_table, gpus_table, wait_times_table

PRIORITY_CHOICES = [("default (101)", ""), ("low", "low"), ("medium", "medium"), ("high", "high")]


def local_now() -> datetime:
    return datetime.now().astimezone()


def error_html(message: str) -> str:
    return f"<p style='color:#b00020'>{html.escape(message)}</p>"


def option_label(option: WaitTimeOption, now: datetime) -> str:
    return f"{option.cluster} · {option.shape.name} · starts {format_local(option.estimated_start, now)} " + (
        f"(wait {format_span(option.wait)})" if option.wait else "(now)"
    )


class RequestForm(widgets.VBox):
    """Ask for GPUs: fill the form, press **Get wait times**, pick a row, press **Request GPUs**.

    ``submitted`` is the GPR created last, ``options`` the wait-time rows shown.
    """

    def __init__(self, client: EGSClient | None = None, **kwargs):
        self.slice = widgets.Dropdown(description="Slice")
        self.count = widgets.BoundedIntText(value=1, min=1, max=cmd.COUNT_MAX, description="Count")
        self.unit = widgets.ToggleButtons(options=[("GPUs", "gpus"), ("nodes", "nodes")], value="gpus")
        self.shape = widgets.Dropdown(description="Shape", options=[("any", "")], value="")
        self.duration = widgets.Text(value="1h", description="For", placeholder="2h, 90m, 1d2h30m")
        self.priority = widgets.Dropdown(description="Priority", options=PRIORITY_CHOICES, value="")
        self.start_after = widgets.Text(description="Start after", placeholder="optional: HH:MM, +30m or ISO-8601")
        self.wait_times_button = widgets.Button(description="Get wait times", icon="clock-o")
        self.wait_table = widgets.HTML()
        self.pick = widgets.RadioButtons(options=[], description="Pick", layout=widgets.Layout(width="auto"))
        self.request_button = widgets.Button(description="Request GPUs", button_style="primary", disabled=True)
        self.message = widgets.HTML()
        self.result = widgets.HTML()
        self.options: tuple[WaitTimeOption, ...] = ()
        self.submitted: GPR | None = None
        super().__init__(
            [
                self.slice,
                widgets.HBox([self.count, self.unit]),
                self.shape,
                self.duration,
                self.priority,
                self.start_after,
                self.wait_times_button,
                self.wait_table,
                self.pick,
                self.request_button,
                self.message,
                self.result,
            ],
            **kwargs,
        )
        self.wait_times_button.on_click(lambda _: self.show_wait_times())
        self.request_button.on_click(lambda _: self.submit())
        self.client = self._connect(client)

    def _connect(self, client: EGSClient | None) -> EGSClient | None:
        """The client, with the slices and shapes filled in; None (and the message) when that fails."""
        try:
            client = client or EGSClient()
            slices = [s.name for s in client.slices()]
            shapes = sorted({s.name for s in client.inventory().shapes})
        except EGSError as e:
            self.message.value = error_html(str(e))
            self.wait_times_button.disabled = True
            return None
        self.slice.options = slices
        preferred = os.environ.get("EGS_SLICE")
        if slices:
            self.slice.value = preferred if preferred in slices else slices[0]
        else:
            self.message.value = error_html("you are a member of no slice; ask an egs-hub admin to add you to one")
            self.wait_times_button.disabled = True
        self.shape.options = [("any", ""), *((name, name) for name in shapes)]
        return client

    def ask(self) -> dict:
        """The form as wait-time / create arguments (no shape: the table offers every shape)."""
        priority = self.priority.value
        if priority:
            priority = cmd.band_priority(priority, self.client.slice(self.slice.value).policy.max_priority)
        start = self.start_after.value.strip()
        return {
            "slice": self.slice.value,
            "duration": cmd.parse_duration_text(self.duration.value),
            self.unit.value: self.count.value,
            "priority": priority or None,
            "start_after": cmd.parse_start_after(start, local_now()) if start else None,
        }

    def show_wait_times(self) -> None:
        if self.client is None:  # the message says why
            return
        self.message.value = ""
        try:
            answer = self.client.wait_times(**self.ask())
        except (EGSError, cmd.CommandError) as e:
            self._show_options(())
            self.message.value = error_html(str(e))
            return
        title = "Estimated start by shape and cluster"
        self.wait_table.value = wait_times_table(answer, local_now(), title)._repr_html_()
        self._show_options(answer.options)

    def _show_options(self, options: tuple[WaitTimeOption, ...]) -> None:
        self.options = options
        if not options:
            self.wait_table.value = ""
        now = local_now()
        self.pick.options = [(option_label(o, now), i) for i, o in enumerate(options)]
        wanted = [i for i, o in enumerate(options) if o.shape.name == self.shape.value]
        self.pick.value = (wanted or [0])[0] if options else None
        self.request_button.disabled = not options

    def submit(self) -> None:
        """Create the GPR for the picked option; show it, or the service's error."""
        if self.client is None:  # the message says why
            return
        self.message.value = ""
        if self.pick.value is None:
            self.message.value = error_html("press Get wait times and pick a row first")
            return
        option = self.options[self.pick.value]
        try:
            gpr = self.client.create_gpr(**self.ask(), shape=option.shape.name, cluster=option.cluster)
        except (EGSError, cmd.CommandError) as e:
            self.message.value = error_html(str(e))
            return
        self.submitted = gpr
        self.result.value = gpr_table([gpr], local_now(), f"GPR {gpr.id} submitted")._repr_html_()


class GpuMonitor(widgets.VBox):
    """The GPUs of your slices with their latest readings, hottest first, refreshed every ``interval`` seconds.

    The refreshing stops when the widget is closed.
    """

    def __init__(self, client: EGSClient | None = None, interval: float = 10.0, **kwargs):
        if not interval > 0:
            raise ValueError(f"interval must be a positive number of seconds, not {interval!r}")
        self.interval = interval
        self.status = widgets.HTML()
        self.table = widgets.HTML()
        self.answer: GPUs | None = None
        self.refreshes = 0
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        super().__init__([self.status, self.table], **kwargs)
        try:
            self.client: EGSClient | None = client or EGSClient()
        except EGSError as e:
            self.client = None
            self.status.value = error_html(str(e))
            return
        self.refresh()
        self._timer = threading.Thread(target=self._refresh_until_closed, name="egs-gpu-monitor", daemon=True)
        self._timer.start()

    @property
    def running(self) -> bool:
        return self.client is not None and self._timer.is_alive()

    def refresh(self) -> None:
        with self._lock:
            try:
                answer = self.client.gpus(sort="temperature")
            except EGSError as e:
                self.status.value = error_html(f"could not refresh: {e}")
                return
            self.answer = answer
            self.refreshes += 1
            self.table.value = gpus_table(answer, "GPUs of your slices, hottest first")._repr_html_()
            self.status.value = (
                f"<p>Updated {local_now():%H:%M:%S}; refreshes every {self.interval:g} s while shown.</p>"
            )

    def _refresh_until_closed(self) -> None:
        while not self._stopped.wait(self.interval):
            if self.comm is None:  # closed in the front end
                return
            self.refresh()

    def close(self) -> None:
        self._stopped.set()
        super().close()
