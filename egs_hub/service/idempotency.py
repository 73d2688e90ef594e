"""Idempotent creates (issue 45): ``POST /gprs``, ``/endpoints``, ``/slices`` and ``/workspace-requests``
take an ``Idempotency-Key`` header, so that a client that did not get its answer (a 503 during a restart, a
connection lost) sends the create again without making a second GPR.

Vocabulary: a *key* is the header's value, the caller's name for one create it means to make once (1 to 255
printable ASCII characters); keys are per caller, a hub user or service (another caller's key is another
key). A key's *record* (store/idempotency.py) says which operation it was sent to, the *fingerprint* of its
body (SHA-256 of the body's JSON value written canonically: spacing and key order do not count) and what
the create *made* (the id of its GPR, endpoint, slice or workspace request). The record is written in the
transaction of what the create writes, so a create that committed before a crash is found by its retry; a
create that failed recorded nothing, and the same key may make it later. A *replay* is the answer to a
retry: the resource the key made as it is now, with the status the first answer had (201; 202 for an
endpoint), its ``Location`` and ``Idempotent-Replayed: true``; a caller who may no longer see it is answered
as the create would answer them now (visibility.py), so a replay shows nothing a GET would not. Not the
first answer's bytes: the record commits before that answer exists (a GPR's estimate is placed, a slice's
view made, after the commit), so a create committed just before a crash has no answer to keep, and the
resource as it is now is what the caller reads next anyway.

A retry with another body, or sent to another operation, is a 409 naming the header; so is a retry whose
resource has since been deleted. Two requests with one key at once: the second waits for the first, then
answers as a retry (or makes it, when the first failed); across processes the store's unique key lets only
one of them commit, and the other answers the one that did. Records are kept at least ``KEEP``: each keyed
create deletes a few older ones after it commits (``PRUNE_MOST``), never a read.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from ..core.errors import Conflict, InvalidRequest
from ..core.requests import MISSING
from ..store import idempotency as store
from ..store import queries
from ..store.db import transaction
from ..store.models import EndpointRow
from ..store.models import Slice as SliceRow
from .commands import no_slice
from .serialize import workspace_request_resource

log = logging.getLogger(__name__)

HEADER = "Idempotency-Key"
REPLAYED = "Idempotent-Replayed"  # "true" on a replay
MAX_LENGTH = 255
KEEP = timedelta(hours=24)  # a record is kept at least this long after its create
PRUNE_MOST = 100  # records older than KEEP that one keyed create deletes, at most


class KeyConflict(Conflict):
    """A 409 whose error body names the header as its ``field``."""

    field = HEADER


def check_key(values: list[str]) -> str | None:
    """The key the header's ``values`` give (None: no header); InvalidRequest naming the header otherwise.
    HTTP drops the spaces around a header's value, so a key neither starts nor ends with one."""
    if not values:
        return None
    if len(values) > 1:
        raise InvalidRequest(HEADER, f"send one {HEADER} header, not {len(values)}")
    key = values[0]
    if not 1 <= len(key) <= MAX_LENGTH:
        raise InvalidRequest(HEADER, f"{HEADER} must be 1 to {MAX_LENGTH} characters long, not {len(key)}")
    if not all(" " <= c <= "~" for c in key):
        raise InvalidRequest(
            HEADER, f"{HEADER} must be printable ASCII (space to '~'); use e.g. a UUID, new for each create"
        )
    return key


def fingerprint_of(body: object) -> str:
    """SHA-256 of the JSON value ``body`` written canonically (sorted keys, no spaces)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Create:
    """One of the creates that take a key: its ``operation`` (as the records name it), and ``replay``,
    which answers what a record of it made, as it is now, given the handler and the made resource's id."""

    operation: str
    replay: Callable[[Any, int], Awaitable[None]]


# The requests holding a key now, per service: (caller kind, caller, key) -> set when it is done.
_IN_FLIGHT: weakref.WeakKeyDictionary[object, dict[tuple[str, str, str], asyncio.Event]] = weakref.WeakKeyDictionary()


class Claim:
    """A request's key for one ``create``, sent by ``caller`` (kind, name) with a body of ``fingerprint``;
    ``key`` None: the request sent none, and ``record`` writes nothing. ``made``: the id of what a create
    with the key made already (replay it), once looked up."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        clock: Callable[[], datetime],
        create: Create,
        caller: tuple[str, str],
        key: str | None,
        fingerprint: str = "",
    ):
        self.sessions = sessions
        self.clock = clock
        self.create = create
        self.caller = caller
        self.key = key
        self.fingerprint = fingerprint
        self.made: int | None = None
        self._in_flight: dict[tuple[str, str, str], asyncio.Event] | None = None

    @classmethod
    async def take(cls, handler, create: Create) -> Claim:
        """The claim on the request's key, looked up once no other request to this service holds it;
        KeyConflict when a record of it is another request's, InvalidRequest when the header or the body
        is malformed."""
        egs = handler.egs
        caller = (handler.current_user.get("kind") or "user", handler.user_name)
        key = check_key(handler.request.headers.get_list(HEADER))
        if key is None:
            return cls(egs.sessions, egs.clock, create, caller, None)
        body = handler.json_body()
        claim = cls(egs.sessions, egs.clock, create, caller, key, fingerprint_of({} if body is MISSING else body))
        in_flight = _IN_FLIGHT.setdefault(egs, {})
        while (busy := in_flight.get(claim.name)) is not None:
            await busy.wait()
        in_flight[claim.name] = asyncio.Event()
        claim._in_flight = in_flight
        try:
            claim.made = claim.look_up()
        except BaseException:
            claim.release()
            raise
        return claim

    @property
    def name(self) -> tuple[str, str, str]:
        return (*self.caller, self.key)

    def look_up(self) -> int | None:
        """The id of what a committed create with this key made (None: none committed); KeyConflict when
        the key was sent with another request."""
        with self.sessions() as session:
            row = store.find(session, *self.caller, self.key)
        if row is None:
            return None
        if row.operation != self.create.operation:
            raise KeyConflict(
                f"this {HEADER} was sent to {row.operation} before, not to {self.create.operation}; "
                f"send a new {HEADER} with each new request"
            )
        if row.fingerprint != self.fingerprint:
            raise KeyConflict(
                f"this {HEADER} was sent to {row.operation} before with another body; a retry sends the same "
                f"body, a new request a new {HEADER}"
            )
        return row.made

    def record(self, session: Session, made: Any) -> None:
        """Record the key in the create's transaction (``session``) as having made ``made`` (a GPR or row
        with an ``id``); nothing when the request sent no key."""
        if self.key is None:
            return
        store.add(
            session,
            *self.caller,
            self.key,
            operation=self.create.operation,
            fingerprint=self.fingerprint,
            made=made.id,
            now=self.clock(),
        )

    def release(self) -> None:
        """Let the next request with this key in (``take``)."""
        if self._in_flight is not None:
            self._in_flight.pop(self.name).set()
            self._in_flight = None

    def prune(self) -> None:
        """Delete a few records older than KEEP, in a transaction of their own: the create is done, and a
        failure here is only logged (the next keyed create prunes them)."""
        try:
            with transaction(self.sessions) as session:
                store.prune(session, self.clock() - KEEP, PRUNE_MOST)
        except SQLAlchemyError as e:
            log.warning("idempotency keys older than %s not pruned: %s", KEEP, e)


def idempotent(create: Create) -> Callable[[Callable], Callable]:
    """Decorate the ``post`` of ``create``: it is called with ``key=`` its Claim, whose ``record`` it calls in
    the transaction of what it makes; a retry of a create that was made is answered by ``create.replay``."""

    def decorate(post: Callable) -> Callable:
        @functools.wraps(post)
        async def wrapper(handler, *args, **kwargs) -> None:
            claim = await Claim.take(handler, create)
            try:
                if claim.made is None:
                    try:
                        await post(handler, *args, key=claim, **kwargs)
                    except IntegrityError:
                        # Another process committed a create with this key meanwhile (the unique key refused
                        # ours, and everything ours wrote went with it): answer what it made.
                        if claim.key is None or (made := claim.look_up()) is None:
                            raise
                        claim.made = made
                    else:
                        if claim.key is not None:
                            claim.prune()
                        return
                handler.set_header(REPLAYED, "true")
                await create.replay(handler, claim.made)
            finally:
                claim.release()

        return wrapper

    return decorate


# The replays: the resource as the create's answer shows it, with its status and Location. A caller who may
# no longer see it (or make it) is answered as the create would answer them now: a GPR's missing slice, an
# endpoint's missing slice, the 403 of a slice's project they no longer manage (visibility.py).


def _gone(what: str) -> KeyConflict:
    return KeyConflict(f"the {what} this {HEADER} made was deleted since; send a new {HEADER} to make another one")


async def _replay_gpr(handler, gpr_id: int) -> None:
    with handler.egs.sessions() as session:
        row = queries.get_gpr_row(session, gpr_id)
        if row is None:
            raise _gone(f"GPR {gpr_id}")
        gpr = queries.to_gpr(row)
        slice_row = queries.get_slice(session, row.slice)
        if slice_row is None or not handler.may_act_in(slice_row.name, slice_row.group_name):
            raise no_slice(row.slice)
    plan = await handler.plan()
    handler.set_header("Location", f"{handler.egs.api_prefix}gprs/{gpr.id}")
    handler.write_json(handler.view(gpr, plan), 201)


async def _replay_slice(handler, slice_id: int) -> None:
    with handler.egs.sessions() as session:
        row = session.get(SliceRow, slice_id)
        if row is None:
            raise _gone("slice")
        handler.require_manager(row.project.name)
        view = await handler.slice_view(session, row)
    handler.set_header("Location", f"{handler.egs.api_prefix}slices/{view.name}")
    handler.write_json(view, 201)


async def _replay_endpoint(handler, endpoint_id: int) -> None:
    with handler.egs.sessions() as session:
        row = session.get(EndpointRow, endpoint_id)
        if row is None:
            raise _gone("endpoint")
        slice_name, name = row.slice, row.name
    handler.require_slice_member(slice_name)
    handler.answer(slice_name, name, 202)


async def _replay_workspace_request(handler, request_id: int) -> None:
    with handler.egs.sessions() as session:
        row = queries.get_workspace_request(session, request_id)
        if row is None or not handler.may_see(row):
            raise _gone(f"workspace request {request_id}")
        view = workspace_request_resource(row)
    handler.set_header("Location", f"{handler.egs.api_prefix}workspace-requests/{view.id}")
    handler.write_json(view, 201)


GPRS = Create("POST /gprs", _replay_gpr)
SLICES = Create("POST /slices", _replay_slice)
ENDPOINTS = Create("POST /endpoints", _replay_endpoint)
WORKSPACE_REQUESTS = Create("POST /workspace-requests", _replay_workspace_request)
