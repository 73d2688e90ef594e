"""A pass run at an interval on the service's event loop: ``tick`` every ``interval`` seconds from
``start`` until ``stop``, and at once after ``wake``; a pass that raises is logged, and the next one
runs as planned."""

from __future__ import annotations

import asyncio
import contextlib
import logging

log = logging.getLogger(__name__)


class Periodic:
    interval: float
    name = "pass"  # how the log names a failed pass
    _runner: asyncio.Task | None = None
    _woken: asyncio.Event | None = None

    def start(self) -> None:
        self._woken = asyncio.Event()
        self._runner = asyncio.ensure_future(self._run())

    def wake(self) -> None:
        """Run the next pass now (once the one under way, if any, is done)."""
        if self._woken is not None:
            self._woken.set()

    async def stop(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
            self._runner = None

    async def _run(self) -> None:
        while True:
            self._woken.clear()
            try:
                await self.tick()
            except Exception:
                log.exception("the %s failed; trying again in %.0f s", self.name, self.interval)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self.interval)

    async def tick(self) -> None:
        raise NotImplementedError
