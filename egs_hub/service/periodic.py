"""A pass run at an interval on the service's event loop: ``tick`` every ``interval`` seconds from
``start`` until ``stop``; a pass that raises is logged, and the next one runs as planned."""

from __future__ import annotations

import asyncio
import contextlib
import logging

log = logging.getLogger(__name__)


class Periodic:
    interval: float
    name = "pass"  # how the log names a failed pass
    _runner: asyncio.Task | None = None

    def start(self) -> None:
        self._runner = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._runner is not None:
            self._runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._runner
            self._runner = None

    async def _run(self) -> None:
        while True:
            try:
                await self.tick()
            except Exception:
                log.exception("the %s failed; trying again in %.0f s", self.name, self.interval)
            await asyncio.sleep(self.interval)

    async def tick(self) -> None:
        raise NotImplementedError
