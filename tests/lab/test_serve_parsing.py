"""`%egs serve`'s parsing (pure, by table) and the client snippet it prints per runtime; serving
against a real egs-hub is in test_magics.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from egs_hub.client import Endpoint
from egs_hub.lab import magic_commands as cmd
from egs_hub.lab.magics import endpoint_snippet

NOW = datetime(2026, 11, 22, 12, 30, tzinfo=timezone(timedelta(hours=1)))

SERVE = {
    "a model": (
        "serve Qwen/Qwen2.5-0.5B-Instruct --gpus 2 --max 3 --idle 5m",
        cmd.Serve("Qwen/Qwen2.5-0.5B-Instruct", "vllm", "qwen2-5-0-5b-instruct", 2, None, 3, timedelta(minutes=5)),
    ),
    "a path": ("serve ./out/my_model/ --no-wait", cmd.Serve("./out/my_model/", "vllm", "my-model", wait=False)),
    "a command": (
        "serve --name echo --min 1 --slice t -- python s.py --port {port}",
        cmd.Serve("", "command", "echo", min_replicas=1, slice="t", command=("python", "s.py", "--port", "{port}")),
    ),
    "kserve": (
        "serve Qwen/Qwen2.5-0.5B-Instruct --runtime kserve --cluster gke-a --gpus 2",
        cmd.Serve("Qwen/Qwen2.5-0.5B-Instruct", "kserve", "qwen2-5-0-5b-instruct", 2, cluster="gke-a"),
    ),
    "vllm in an image": (
        "serve m --image=vllm/vllm-openai:v0.6.3 --cluster=gke-a",
        cmd.Serve("m", "vllm", "m", cluster="gke-a", image="vllm/vllm-openai:v0.6.3"),
    ),
    "a command in an image (on Kubernetes)": (
        "serve --runtime command --image registry.example/echo:1 --name echo -- python s.py {port}",
        cmd.Serve("", "command", "echo", image="registry.example/echo:1", command=("python", "s.py", "{port}")),
    ),
    "endpoints": ("endpoints --slice t", cmd.Endpoints("t")),
}
SERVE_REFUSED = {
    "no model": ("serve", "%egs serve needs a MODEL"),
    "no command": ("serve --runtime command --name x", "--runtime command needs the server's command after --"),
    "command for vllm": ("serve m --runtime vllm -- python s.py", "a command after -- is for --runtime command"),
    "no model for kserve": ("serve --runtime kserve --name x", "%egs serve --runtime kserve needs a MODEL"),
    "command for kserve": (
        "serve m --runtime kserve -- python s.py {port}",
        "a command after -- is for --runtime command, not kserve (which serves MODEL itself); to run your own "
        "server in an image, use --runtime command --image IMAGE -- COMMAND",
    ),
    "runtime": ("serve m --runtime tgi", "--runtime must be one of vllm, kserve, command, not 'tgi'"),
    "cluster without a name": ("serve m --cluster", "--cluster needs a value"),
    "image without a name": ("serve m --image --gpus 1", "--image needs a value"),
    "empty image": ("serve m --image=", "--image needs a value"),
    "two clusters": ("serve m --cluster a --cluster b", "--cluster is given more than once"),
    "option after --": ("serve m --runtime kserve -- --image x", "a command after -- is for --runtime command"),
    "unknown option": (
        "serve m --node n1",
        "unknown option --node for %egs serve; options: --cluster, --gpus, --idle, --image, --max, --min, --name, "
        "--runtime, --slice",
    ),
    "gpus": ("serve m --gpus 0", "--gpus must be a whole number from 1 to 100, not '0'"),
    "max": ("serve m --max 101", "--max must be a whole number from 1 to 100"),
    "idle": ("serve m --idle soon", "the duration 'soon' is not a duration"),
    "two models": ("serve a b", "%egs serve takes one MODEL, not 'a b'"),
    "endpoints args": ("endpoints all", "%egs endpoints takes only --slice NAME, not 'all'"),
}


@pytest.mark.parametrize(("line", "want"), SERVE.values(), ids=SERVE.keys())
def test_parse_serve(line, want):
    assert cmd.parse_command(line, NOW) == want


@pytest.mark.parametrize(("line", "want_message"), SERVE_REFUSED.values(), ids=SERVE_REFUSED.keys())
def test_parse_serve_refuses_with_one_line(line, want_message):
    with pytest.raises(cmd.CommandError) as error:
        cmd.parse_command(line, NOW)
    assert want_message in str(error.value) and "\n" not in str(error.value)


HUB = "https://hub.example"
SNIPPETS = {  # (runtime, model): want_lines, the snippet's lines after "Its URL: ... From Python:"
    "vllm: the OpenAI API at v1, the model id": (
        ("vllm", "Qwen/Qwen2.5-0.5B-Instruct"),
        [
            "  import os; from openai import OpenAI",
            f'  llm = OpenAI(base_url="{HUB}/services/egs/endpoints/t/qwen/v1", '
            'api_key=os.environ["JUPYTERHUB_API_TOKEN"])',
            '  llm.chat.completions.create(model="Qwen/Qwen2.5-0.5B-Instruct", '
            'messages=[{"role": "user", "content": "Hi"}])',
        ],
    ),
    "kserve: its Hugging Face runtime's OpenAI API, the model by the endpoint's name": (
        ("kserve", "Qwen/Qwen2.5-0.5B-Instruct"),
        [
            "  import os; from openai import OpenAI",
            f'  llm = OpenAI(base_url="{HUB}/services/egs/endpoints/t/qwen/openai/v1", '
            'api_key=os.environ["JUPYTERHUB_API_TOKEN"])',
            '  llm.chat.completions.create(model="qwen", messages=[{"role": "user", "content": "Hi"}])',
        ],
    ),
    "command: a plain request": (
        ("command", ""),
        [
            "  import os, requests",
            f'  requests.get("{HUB}/services/egs/endpoints/t/qwen/", '
            'headers={"Authorization": "token " + os.environ["JUPYTERHUB_API_TOKEN"]})',
        ],
    ),
}


@pytest.mark.parametrize(("served", "want_lines"), SNIPPETS.values(), ids=SNIPPETS.keys())
def test_endpoint_snippet(served, want_lines):
    runtime, model = served
    endpoint = Endpoint.model_construct(
        slice="t", name="qwen", runtime=runtime, model=model, url="/services/egs/endpoints/t/qwen/"
    )
    first, *lines = endpoint_snippet(endpoint, HUB).splitlines()
    assert first == f"Its URL: {HUB}/services/egs/endpoints/t/qwen/ (send a hub token). From Python:"
    assert lines == want_lines
