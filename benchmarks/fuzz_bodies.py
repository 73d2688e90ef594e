"""Does the document allow only what the API takes? Schema-valid bodies through the API's parser.

For every operation with a body, schemathesis generates bodies valid by the OpenAPI
document (its positive mode, as `st run` does), and each goes through ``parse_body``
with the operation's model, as the handler parses it: no server, no store. A refusal
here is a rule of the API the document does not say (issue 53, item 3); what only the
store can decide (a slice that exists, a quota) is not tried here. It prints, per body
model, the share of schema-valid bodies the API takes and its most common refusals.

    python benchmarks/fuzz_bodies.py --examples 300 --json bodies.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the tests package

from tests.service.fuzzing import schema_valid_bodies


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=300, help="bodies per operation (300)")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    results = schema_valid_bodies(args.examples, args.seed)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    bodies = sum(r["bodies"] for r in results.values())
    taken = sum(r["taken"] for r in results.values())
    print(f"{taken} of {bodies} schema-valid bodies taken ({taken / bodies:.1%}) over {len(results)} operations")
    for label, result in sorted(results.items(), key=lambda item: item[1]["share_taken"] or 0):
        print(f"  {label:<44} {result['model']:<24} {result['taken']:>5}/{result['bodies']:<5}")
        for refusal, count in result["refusals"].items():
            print(f"      {count:>5}  {refusal}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
