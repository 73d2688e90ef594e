"""The API fuzzed at length: schemathesis against a live egs-hub, many examples per operation.

The same run as tests/service/test_openapi.py (tests/service/fuzzing.py: every operation
of the OpenAPI document, valid and invalid input, as an admin and as a slice member,
through the hub's proxy), with ``--examples`` per operation, role and kind of input
on each database: 80 by default, where CI takes 8 to keep its time (test_openapi.py says
why). It counts the requests sent and their statuses, and per operation how many were
answered 2xx, and fails (exit 1) on any 5xx, any answer the document does not describe, any
schema-invalid input accepted, any 4xx that changed something, and any operation no request
of which was answered 2xx (its logic never ran).

    python benchmarks/fuzz_api.py --json fuzz.json
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import pathlib
import sys
import tempfile
import time

from bench_api import drop_postgres_database, log, postgres_database
from schemathesis import GenerationMode

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the tests package

from egs_hub.embedded import free_port
from tests.k8s.threaded import EmulatorThread
from tests.service.fuzzing import MEMBER, NO_INVALID_INPUT, actors, fuzz, prepare
from tests.service.hub import start_hub, stop_hub

MODES = {"valid": GenerationMode.POSITIVE, "invalid": GenerationMode.NEGATIVE}


def fuzz_database(kind: str, args) -> dict:
    work = tempfile.mkdtemp(prefix=f"egs-fuzz-{kind}-")
    pg_name = None
    if kind == "postgresql":
        pg_name, db_url = postgres_database(args.postgres_url)
    else:
        db_url = f"sqlite:///{work}/egs.sqlite"
    # A Kubernetes cluster that answers, for the operations on one (pools, slice kubeconfigs).
    with EmulatorThread(pathlib.Path(work)) as emulated:
        hub = start_hub(work, db_url, free_port())
        runs, problems = [], []
        try:
            prepared = prepare(hub, emulated.kubeconfig)
            users = actors(hub)
            answers, refusals = collections.defaultdict(collections.Counter), {}
            for role, token in (("admin", hub.admin_token), ("member", hub.user_token(MEMBER))):
                for mode_name, mode in MODES.items():
                    started = time.perf_counter()
                    fuzzed = fuzz(hub, token, users, mode, args.examples, args.seed, prepared)
                    for label, statuses in fuzzed.answers.items():
                        answers[label].update(statuses)
                    refusals.update(fuzzed.refusals)
                    allowed = NO_INVALID_INPUT if mode is GenerationMode.NEGATIVE else set()
                    unexpected = sorted(set(fuzzed.nothing_to_send) - allowed)
                    run = {
                        "role": role,
                        "input": mode_name,
                        "requests": fuzzed.requests,
                        "seconds": round(time.perf_counter() - started, 1),
                        "statuses": {str(k): v for k, v in sorted(fuzzed.statuses.items())},
                        "failures": fuzzed.failures,
                        "nothing_to_send_unexpected": unexpected,
                    }
                    log(f"{kind} {role} {mode_name}: {fuzzed.requests} requests, {len(fuzzed.failures)} failures")
                    runs.append(run)
                    problems += fuzzed.failures + [f"nothing to send to {label}" for label in unexpected]
        finally:
            stop_hub(hub)
            if pg_name is not None:
                drop_postgres_database(args.postgres_url, pg_name)
    never = sorted(label for label, statuses in answers.items() if not _succeeded(statuses))
    for label in never:
        why = "; ".join(f"{status}: {refusals.get((label, status), '')}" for status in sorted(answers[label]))
        problems.append(f"no request to {label} answered 2xx, its logic never ran ({why})")
    return {
        "requests": sum(r["requests"] for r in runs),
        "operations": {
            label: {"sent": sum(answers[label].values()), "2xx": _succeeded(answers[label])}
            for label in sorted(answers)
        },
        "never_2xx": never,
        "server_errors": sum(v for r in runs for k, v in r["statuses"].items() if int(k) >= 500),
        "problems": problems,
        "runs": runs,
    }


def _succeeded(statuses: collections.Counter) -> int:
    return sum(count for status, count in statuses.items() if 200 <= status < 300)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="write the figures to this file")
    parser.add_argument("--databases", nargs="+", choices=["sqlite", "postgresql"], default=["sqlite", "postgresql"])
    parser.add_argument("--examples", type=int, default=80, help="examples per operation, role and input kind (80)")
    parser.add_argument("--seed", type=int, default=19)
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()

    results = {kind: fuzz_database(kind, args) for kind in args.databases}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    for kind, result in results.items():
        problems = len(result["problems"])
        print(f"\n{kind}: {result['requests']} requests, {result['server_errors']} 5xx, {problems} problems")
        for run in result["runs"]:
            print(f"  {run['role']:<6} {run['input']:<7} {run['requests']:>6} requests  {run['statuses']}")
        print(f"  {'operation':<48} {'sent':>6} {'2xx':>6}")
        for label, counts in result["operations"].items():
            print(f"  {label:<48} {counts['sent']:>6} {counts['2xx']:>6}")
        for problem in result["problems"]:
            print(f"  PROBLEM {problem[:2000]}")
    return 1 if any(r["problems"] or r["server_errors"] for r in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
