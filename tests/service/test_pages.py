"""The pages over HTTP: every page renders for an admin, admin pages answer a readable 403 to
others, user pages carry no admin parts, and every script a page loads (and imports) is served.

What a page shows comes from the REST API in the browser (tests/browser/test_admin_pages.py);
here a hub token stands in for the login cookie.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from egs_hub.service.app import EGSService
from egs_hub.service.handlers.pages import ADMIN_PAGES, USER_PAGES

from .hub import Hub, sqlite_hub

STATIC = Path(__file__).parents[2] / "egs_hub" / "service" / "static"
SCRIPT = re.compile(r'<script type="module" src="([^"]+)"></script>')
IMPORT = re.compile(r'^import .* from "\./([^"]+)";$', re.MULTILINE)


@pytest.fixture(scope="module")
def hub(tmp_path_factory) -> Iterator[Hub]:
    with sqlite_hub(tmp_path_factory.mktemp("pages-hub")) as running:
        yield running


def get(hub: Hub, path: str, token: str | None) -> requests.Response:
    headers = {"Authorization": f"token {token}"} if token else {}
    return requests.get(f"{hub.url}/services/egs/{path}", headers=headers, timeout=30, allow_redirects=False)


def html(response: requests.Response) -> str:
    assert response.headers["Content-Type"] == "text/html; charset=UTF-8"
    csp = response.headers["Content-Security-Policy"]
    assert "script-src 'self';" in csp and "style-src 'self';" in csp and "unsafe" not in csp
    return response.text


def nav_links(text: str) -> list[str]:
    (nav,) = re.findall(r'<nav aria-label="pages".*?</nav>', text, re.DOTALL)
    return re.findall(r'href="/services/egs/([^"]*)"', nav)


@pytest.mark.parametrize("page", ADMIN_PAGES + USER_PAGES, ids=lambda p: p.path or "portal")
def test_every_page_renders_for_an_admin_with_its_script(hub, page):
    text = html(get(hub, page.path, hub.admin_token))
    assert f"<title>egs-hub · {page.title}</title>" in text
    assert nav_links(text) == ["", *(p.path for p in ADMIN_PAGES)]
    (script,) = SCRIPT.findall(text)
    served = requests.get(hub.url + script, timeout=30)
    assert served.status_code == 200 and "javascript" in served.headers["Content-Type"]


def test_admin_pages_refuse_others_with_a_readable_403_and_user_pages_hide_admin_parts(hub):
    token = hub.user_token("pages-user")
    for page in ADMIN_PAGES:
        response = get(hub, page.path, token)
        assert response.status_code == 403, page.path
        text = html(response)
        assert "<h1>403: Forbidden</h1>" in text
        assert "need the JupyterHub scope custom:egs:admin, which pages-user does not have" in text
    for page in USER_PAGES:
        text = html(get(hub, page.path, token))
        assert 'data-admin="false" data-view="user"' in text
        assert nav_links(text) == [p.path for p in USER_PAGES]
    requests_page = html(get(hub, "requests", token))
    assert "GPU requests of my workspaces" in requests_page and "Evictions" not in requests_page
    assert "Create a workspace" not in html(get(hub, "", token))


def test_the_clusters_page_is_for_admins_with_its_register_form(hub):
    text = html(get(hub, "admin/clusters", hub.admin_token))
    assert "<h1>Clusters</h1>" in text and 'src="/services/egs/static/clusters.js"' in text
    for field in ('name="name"', 'name="kubeconfig"', 'name="context"', 'name="in_cluster"'):
        assert field in text
    refused = get(hub, "admin/clusters", hub.user_token("clusters-user"))
    assert refused.status_code == 403
    assert "Register a Kubernetes cluster" not in html(refused)


def test_an_admin_on_a_user_page_gets_the_user_view(hub):
    text = html(get(hub, "requests", hub.admin_token))
    assert 'data-admin="true" data-view="user"' in text and "Evictions" not in text
    admin_text = html(get(hub, "admin/requests", hub.admin_token))
    assert 'data-admin="true" data-view="admin"' in admin_text and "Evictions" in admin_text


def test_pages_send_strangers_to_the_hub_login(hub):
    for path in ("", "requests", "admin/", "admin/slices"):
        response = get(hub, path, None)
        assert response.status_code == 302, path
        location = response.headers["Location"]
        assert "/hub/api/oauth2/authorize" in location or "/hub/login" in location
    response = get(hub, "admin", hub.admin_token)
    assert response.status_code == 301 and response.headers["Location"] == "/services/egs/admin/"


def test_every_module_a_script_imports_is_served(hub):
    scripts = sorted(STATIC.glob("*.js"))
    assert scripts
    for script in scripts:
        for name in IMPORT.findall(script.read_text()):
            assert (STATIC / name).is_file(), f"{script.name} imports {name}, which is not in static/"
            assert requests.get(f"{hub.url}/services/egs/static/{name}", timeout=30).status_code == 200


def test_the_cookie_secret_is_the_environments_when_set_else_one_kept_in_the_data_dir(tmp_path, monkeypatch):
    """Every replica of the chart signs the portal's cookies with $EGS_COOKIE_SECRET (its Secret)."""
    monkeypatch.setenv("EGS_COOKIE_SECRET", "same-in-every-replica")
    assert EGSService(data_dir=str(tmp_path))._cookie_secret() == b"same-in-every-replica"
    assert not (tmp_path / "egs_cookie_secret").exists()
    monkeypatch.delenv("EGS_COOKIE_SECRET")
    made = EGSService(data_dir=str(tmp_path))._cookie_secret()
    assert len(made) == 64 and EGSService(data_dir=str(tmp_path))._cookie_secret() == made
