"""The client's route table is the service's declarations (issue 47): egs_hub/client/routes.py is what
the operations the service declares make now. After adding or changing an operation, write it again with
``python -m tests.client.test_routes``."""

from __future__ import annotations

import pathlib

from egs_hub.client.routes import ROUTES
from egs_hub.service.app import API_OPERATIONS

TABLE = pathlib.Path(__file__).resolve().parents[2] / "egs_hub" / "client" / "routes.py"
HEAD = '''"""Every operation of REST API v1 by its operationId, as the service declares it: its method, its path
under the API's URL (path parameters in braces), the resource model of its success answer (None: no
body; "dict": any JSON object) and whether it takes an Idempotency-Key. Written from the service's
declarations by ``python -m tests.client.test_routes`` (which fails when this is stale): do not edit."""

from __future__ import annotations

from typing import NamedTuple


class Route(NamedTuple):
    method: str
    path: str
    answer: str | None
    idempotent: bool


ROUTES = {
'''


def written() -> str:
    lines = []
    for op, _ in API_OPERATIONS:
        answer = None if op.answer is None else "dict" if op.answer is dict else op.answer.__name__
        fields = f"{op.method.upper()!r}, {op.path.lstrip('/')!r}, {answer!r}, {op.idempotent}".replace("'", '"')
        line = f'    "{op.operation_id}": Route({fields}),\n'
        lines.append(line if len(line) <= 121 else f'    "{op.operation_id}": Route(\n        {fields}\n    ),\n')
    return HEAD + "".join(lines) + "}\n"


def test_the_route_table_is_written_from_the_declarations_as_they_are():
    assert TABLE.read_text() == written(), "egs_hub/client/routes.py is stale: python -m tests.client.test_routes"
    assert len(ROUTES) == len(API_OPERATIONS)


if __name__ == "__main__":
    TABLE.write_text(written())
    print(f"wrote {TABLE}")
