"""The service's client of the JupyterHub REST API.

It uses the service's own hub token (``JUPYTERHUB_API_TOKEN``), whose role
grants group, user and server administration: slice membership lives in hub
groups, and the local backend restarts servers through the hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from urllib.parse import quote

from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest

from ..core.errors import InvalidRequest


class HubAPIError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class HubGroup:
    """A hub group as GET /hub/api/groups/{name} answers it (JupyterHub 5 and 6: kind, name, users,
    properties, and roles when the token holds read:roles:groups, which admin:groups grants)."""

    name: str
    users: tuple[str, ...]
    roles: tuple[str, ...] | None  # None: the hub did not list them (the token lacks read:roles:groups)


class HubClient:
    def __init__(self, api_url: str, token: str, stop_timeout: float = 120.0):
        self.api_url = api_url.rstrip("/")
        self.token = token
        self.stop_timeout = stop_timeout
        self.http = AsyncHTTPClient()

    async def request(self, method: str, path: str, body: object = None) -> dict | list | None:
        request = HTTPRequest(
            f"{self.api_url}/{path.lstrip('/')}",
            method=method,
            headers={"Authorization": f"token {self.token}", "Content-Type": "application/json"},
            body=None if body is None and method in ("GET", "DELETE") else json.dumps(body or {}),
            allow_nonstandard_methods=True,
            request_timeout=30,
        )
        try:
            response = await self.http.fetch(request)
        except HTTPClientError as e:
            message = e.message
            if e.response is not None and e.response.body:
                with contextlib.suppress(ValueError, AttributeError):
                    message = json.loads(e.response.body).get("message", message)
            raise HubAPIError(e.code, f"JupyterHub answered {e.code} to {method} {path}: {message}") from None
        except OSError as e:
            raise HubAPIError(502, f"JupyterHub at {self.api_url} is unreachable: {e}") from None
        return json.loads(response.body) if response.body else None

    # Groups: a slice's members are its hub group's members.

    async def ensure_group(self, name: str) -> bool:
        """Create the group if it is missing; True when this call created it."""
        try:
            await self.request("POST", f"groups/{quote(name, safe='')}")
        except HubAPIError as e:
            if e.status == 409:
                return False
            raise
        return True

    async def delete_group(self, name: str) -> None:
        try:
            await self.request("DELETE", f"groups/{quote(name, safe='')}")
        except HubAPIError as e:
            if e.status != 404:
                raise

    async def group(self, name: str) -> HubGroup | None:
        """The hub group ``name`` with its members and roles; None when there is none."""
        try:
            model = await self.request("GET", f"groups/{quote(name, safe='')}")
        except HubAPIError as e:
            if e.status == 404:
                return None
            raise
        roles = model.get("roles")
        return HubGroup(
            name=model.get("name", name),
            users=tuple(sorted(model.get("users", []))),
            roles=None if roles is None else tuple(sorted(roles)),
        )

    async def group_members(self, name: str) -> list[str]:
        try:
            group = await self.request("GET", f"groups/{quote(name, safe='')}")
        except HubAPIError as e:
            if e.status == 404:
                return []
            raise
        return sorted(group.get("users", []))

    async def groups(self) -> dict[str, list[str]]:
        """Every hub group with its members, page by page."""
        groups, offset, limit = {}, 0, 200
        while True:
            page = await self.request("GET", f"groups?offset={offset}&limit={limit}")
            groups.update({g["name"]: sorted(g.get("users", [])) for g in page})
            if len(page) < limit:
                return groups
            offset += limit

    async def ensure_user(self, name: str) -> bool:
        """Create the hub user if missing; True when this call created it."""
        try:
            await self.request("POST", f"users/{quote(name, safe='')}")
        except HubAPIError as e:
            if e.status == 409:
                return False
            raise
        return True

    async def delete_user(self, name: str) -> None:
        try:
            await self.request("DELETE", f"users/{quote(name, safe='')}")
        except HubAPIError as e:
            if e.status != 404:
                raise

    async def add_members(self, group: str, users: list[str], field: str = "members") -> list[str]:
        """Add users (normalised names, core/user_names.py) to a group, creating missing hub users;
        returns the users it created.

        If a step fails, the users this call created are deleted again, so no stray hub user is left
        that someone could sign up as. A name the hub refuses (400) is bad input: InvalidRequest
        naming ``field``."""
        created, refused = [], ""
        try:
            for user in users:
                refused = f"the user name {user!r}"
                if await self.ensure_user(user):
                    created.append(user)
            refused = f"to add {', '.join(users)} to group {group!r}"
            await self.request("POST", f"groups/{quote(group, safe='')}/users", {"users": users})
        except HubAPIError as e:
            for made in created:
                await self.delete_user(made)
            if e.status == 400:
                raise InvalidRequest(field, f"JupyterHub refuses {refused}: {e}") from None
            raise
        return created

    async def remove_members(self, group: str, users: list[str]) -> None:
        await self.request("DELETE", f"groups/{quote(group, safe='')}/users", {"users": users})

    # Servers

    def _server_path(self, user: str, name: str) -> str:
        user = quote(user, safe="")
        return f"users/{user}/servers/{quote(name, safe='')}" if name else f"users/{user}/server"

    async def server(self, user: str, name: str) -> dict | None:
        """The hub's model of the user's server ``name`` ("" the default); None when not running."""
        try:
            model = await self.request("GET", f"users/{quote(user, safe='')}")
        except HubAPIError as e:
            if e.status == 404:
                return None
            raise
        return (model.get("servers") or {}).get(name)

    async def restart_server(self, user: str, name: str) -> bool:
        """Stop a running server and start it with the same options; False if not running."""
        server = await self.server(user, name)
        if server is None:
            return False
        options = server.get("user_options") or {}
        await self.request("DELETE", self._server_path(user, name))
        deadline = asyncio.get_running_loop().time() + self.stop_timeout
        while await self.server(user, name) is not None:
            if asyncio.get_running_loop().time() > deadline:
                raise HubAPIError(504, f"{user}'s server {name!r} did not stop in {self.stop_timeout:.0f} s")
            await asyncio.sleep(0.5)
        await self.request("POST", self._server_path(user, name), options)
        return True
