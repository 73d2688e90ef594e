"""The sidebar's API types are the ones the service's OpenAPI document makes (issue 47): the committed
labextension/src/api-types.ts is what openapi-typescript (the labextension's dev dependency) writes from
the document the declared operations make now. After changing an operation or a model, `make
api-types` writes it again."""

from __future__ import annotations

import json
import pathlib
import subprocess

from egs_hub.service.app import api_document

ROOT = pathlib.Path(__file__).resolve().parents[2]
LABEXTENSION = ROOT / "labextension"
GENERATOR = LABEXTENSION / "node_modules" / ".bin" / "openapi-typescript"
COMMITTED = LABEXTENSION / "src" / "api-types.ts"


def test_the_labextensions_api_types_are_generated_from_the_document_as_it_is(tmp_path):
    assert GENERATOR.exists(), f"{GENERATOR} is missing: `make jest` installs the labextension's dev dependencies"
    document = tmp_path / "openapi.json"
    document.write_text(json.dumps(api_document("/services/egs/api/v1/", "test"), sort_keys=True))  # as egs-hub openapi
    generated = tmp_path / "api-types.ts"
    subprocess.run(
        [GENERATOR, document, "--default-non-nullable", "false", "-o", generated],
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert generated.read_text() == COMMITTED.read_text(), (
        "labextension/src/api-types.ts is stale: `make api-types` writes it from the operations' document"
    )
