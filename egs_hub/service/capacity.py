"""What-if capacity plans, run in the background for the admin page (POST /capacity-plans).

Each plan is the service's history replayed through the planner (sim/what_if.py) in a child
process, so the replay's CPU does not hold up the event loop; the child reports its progress line
by line. One runs at a time; the service keeps the last ``KEPT`` in memory (they are answers to a
question, not state: a restart forgets them, and one running is stopped).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from dataclasses import dataclass, field
from datetime import datetime

from ..core.capacity_change import ChangeError, changed_groups, planned_groups
from ..core.errors import Conflict, InvalidRequest
from ..core.requests import CapacityPlanCreate
from ..core.resources import CapacityPlan, NodeCount, WhatIfResult
from ..store import queries

log = logging.getLogger(__name__)

KEPT = 10


@dataclass
class Run:
    id: int
    asked: CapacityPlanCreate
    started_by: str
    started_at: datetime
    status: str = "running"
    progress: float = 0.0
    finished_at: datetime | None = None
    error: str | None = None
    result: dict | None = None
    process: asyncio.subprocess.Process | None = field(default=None, repr=False)

    def view(self) -> CapacityPlan:
        def counts(changes) -> tuple[NodeCount, ...]:
            return tuple(NodeCount(shape=c.shape, count=c.count, price=c.price) for c in changes)

        return CapacityPlan(
            id=self.id,
            status=self.status,
            progress=self.progress,
            since=self.asked.since,
            add_nodes=counts(self.asked.add_nodes),
            remove_nodes=counts(self.asked.remove_nodes),
            started_by=self.started_by,
            started_at=self.started_at,
            finished_at=self.finished_at,
            error=self.error,
            result=None if self.result is None else WhatIfResult.model_validate(self.result),
        )


class CapacityPlans:
    def __init__(self, db_url: str, clock):
        self.db_url = db_url
        self.clock = clock
        self.runs: dict[int, Run] = {}
        self._last_id = 0
        self._tasks: set[asyncio.Task] = set()

    def start(self, session, asked: CapacityPlanCreate, user: str) -> Run:
        """Start a plan (InvalidRequest naming a change that cannot be made to the nodes planned on now;
        Conflict while one runs)."""
        self._check_changes(session, asked)
        running = next((r for r in self.runs.values() if r.status == "running"), None)
        if running is not None:
            raise Conflict(
                f"capacity plan {running.id} is running: one runs at a time (GET /capacity-plans/{running.id})"
            )
        self._last_id += 1
        run = Run(self._last_id, asked, user, self.clock())
        self.runs[run.id] = run
        for old in sorted(self.runs)[:-KEPT]:
            del self.runs[old]
        task = asyncio.ensure_future(self._run(run))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return run

    @staticmethod
    def _check_changes(session, asked: CapacityPlanCreate) -> None:
        if not asked.add_nodes and not asked.remove_nodes:
            return
        groups = planned_groups(queries.planned_node_shapes(session))
        add = [(c.shape, c.count) for c in asked.add_nodes]
        remove = [(c.shape, c.count) for c in asked.remove_nodes]
        for name, (adding, removing) in (("add_nodes", (add, [])), ("remove_nodes", (add, remove))):
            try:
                changed_groups(groups, adding, removing)
            except ChangeError as e:
                raise InvalidRequest(name, f"{name}: {e.detail}") from None

    async def _run(self, run: Run) -> None:
        asked = {
            "db_url": self.db_url,
            "since_s": run.asked.since.total_seconds(),
            "add_nodes": [[c.shape, c.count] for c in run.asked.add_nodes],
            "remove_nodes": [[c.shape, c.count] for c in run.asked.remove_nodes],
            "prices": [[c.shape, c.price] for c in run.asked.add_nodes if c.price is not None],
        }
        try:
            process = run.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "egs_hub.sim.what_if",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                limit=64 * 1024 * 1024,  # the result is one line
            )
            process.stdin.write(json.dumps(asked).encode())
            process.stdin.close()
            async for line in process.stdout:
                kind, _, rest = line.decode().rstrip("\n").partition(" ")
                if kind == "progress":
                    run.progress = float(rest)
                elif kind == "result":
                    run.result = json.loads(rest)
                elif kind == "error":
                    run.error = rest
            stderr = (await process.stderr.read()).decode()
            code = await process.wait()
            if run.result is None and run.error is None:
                run.error = f"the replay exited with status {code}: {stderr.strip()[-500:] or 'no message'}"
        except Exception as e:  # the run fails, saying why; the service goes on
            log.exception("capacity plan %s failed", run.id)
            run.error = f"{type(e).__name__}: {e}"
        finally:
            run.status = "done" if run.result is not None else "failed"
            run.progress = 1.0 if run.result is not None else run.progress
            run.finished_at = self.clock()
            run.process = None

    async def stop(self) -> None:
        """Stop a running plan's child process."""
        for run in self.runs.values():
            if run.process is not None:
                with contextlib.suppress(ProcessLookupError):
                    run.process.kill()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
