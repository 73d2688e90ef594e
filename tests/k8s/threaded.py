"""The emulator served from a thread of its own, for tests whose own code is not asynchronous.

``with EmulatorThread(directory) as cluster:`` serves a ClusterEmulator over HTTP on loopback
from an event loop in a daemon thread until the block ends, and writes a kubeconfig for it
(``cluster.kubeconfig``, context ``emulated``) with the emulator's own token. A process of
egs-hub's (the fuzzed hub's service) reaches it as it would a cluster's API server.
"""

from __future__ import annotations

import asyncio
import pathlib
import threading

from kmock import Server

from .emulator import ClusterEmulator
from .kubeconfig import write_kubeconfig

CONTEXT = "emulated"
START_TIMEOUT = 30.0


class EmulatorThread:
    def __init__(self, directory: pathlib.Path):
        self.kubeconfig = directory / "emulated.kubeconfig"
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="k8s-emulator", daemon=True)

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._serve())
        except BaseException as e:  # seen by __enter__ when it happens before the emulator is up
            self._failed = e
            self._ready.set()
        finally:
            self._loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        async with ClusterEmulator() as emulator, Server(emulator):
            write_kubeconfig(self.kubeconfig, str(emulator.url).rstrip("/"), emulator.token, CONTEXT)
            self._ready.set()
            await self._stop.wait()

    def __enter__(self) -> EmulatorThread:
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT):
            raise AssertionError(f"the emulator did not start within {START_TIMEOUT} s")
        if self._failed is not None:
            raise AssertionError("the emulator did not start") from self._failed
        return self

    def __exit__(self, *exc) -> None:
        if self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(START_TIMEOUT)
