"""The embedded default's login: NativeAuthenticator, with these additions.

- The first start creates the hub admin ``admin`` with the password from
  ``EGS_ADMIN_PASSWORD``, or a generated one printed once.
- User names are folded (NFKC, lower case) and checked by core/user_names.py, as
  the service folds and checks member names: one user per name, and no name with
  an invisible or text-direction character (issue 45).
- Signup invites (invites.py): an admin makes a one-use link for one user name
  at /hub/invite; a signup through it is authorized at once. A reserved name (an
  open invite's, or a hub user's that nobody signed up as: a member an admin
  added) cannot be signed up for without its invite. Any other signup waits until
  an admin authorizes it at /hub/authorize, which tells signups made without an
  invite apart; /hub/invite deletes such a pending signup (a stranger's, maybe).

And two repairs of nativeauthenticator 1.3.0's pages: ``LoginHandler`` makes
/hub/login work on JupyterHub 6; ``SignUpHandler`` tells an authorized user
that they can log in now (see their docstrings).
"""

from __future__ import annotations

import os
import secrets
import sys
from datetime import timedelta

from jinja2 import ChoiceLoader, Environment, FileSystemLoader
from jupyterhub import orm
from jupyterhub.scopes import needs_scope
from jupyterhub.utils import utcnow
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.handlers import TEMPLATE_DIR, LocalBase
from nativeauthenticator.handlers import LoginHandler as NativeLoginHandler
from nativeauthenticator.handlers import SignUpHandler as NativeSignUpHandler
from nativeauthenticator.orm import UserInfo
from tornado import web
from tornado.escape import url_escape
from tornado.httputil import url_concat
from traitlets import Integer, Unicode

from . import proxy_errors
from .core.user_names import fold_user_name, user_name_problem
from .invites import (
    INVITE_LIFETIME,
    SignupInvite,
    create_invite_table,
    find_invite,
    invite_problem,
    invited_names,
    make_invite,
    open_invite,
)

BOOTSTRAP_ADMIN = "admin"
EGS_TEMPLATE_DIR = os.path.join(os.path.dirname(__file__), "hub_templates")


def refused_name(typed: str) -> str | None:
    """Why the hub refuses the user name ``typed`` (core/user_names.py), as a page says it; None when it does not."""
    problem = user_name_problem(typed)
    return None if problem is None else f"{typed!r} is not a user name the hub accepts: {problem}."


def hub_user_exists(db, username: str) -> bool:
    """Whether the hub has a user ``username``: one that logged in, or one an admin or the service added."""
    return orm.User.find(db, username) is not None


def add_template_dir(env: Environment | None, directory: str) -> None:
    """Let ``env``, one of the hub's jinja environments, find templates in ``directory`` too (once)."""
    if env is None or directory in getattr(env, "egs_template_dirs", ()):
        return
    env.loader = ChoiceLoader([env.loader, FileSystemLoader([directory])])
    env.egs_template_dirs = (*getattr(env, "egs_template_dirs", ()), directory)


class LoginHandler(NativeLoginHandler):
    """nativeauthenticator 1.3.0's /hub/login, repaired for JupyterHub 6.

    On JupyterHub 6.1.1 the original breaks in two places:

    - ``post`` times the login with ``self.statsd``, which JupyterHub 6 no longer
      has: every sign-in answered 500 (``AttributeError: 'LoginHandler' object has
      no attribute 'statsd'``) and nobody could log in.
    - JupyterHub 6 shows an error of a login form POST (an expired form, say) as the
      login page with the message, by calling ``self._render(sync=True, message=...,
      status_code=..., ...)``; the original ``_render`` accepts none of these, so the
      error page failed too (``TypeError``) and the browser got a bare 500. And
      nativeauthenticator adds its templates only to the hub's async template
      environment, so a synchronous render does not find native-login.html either.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        add_template_dir(self.settings.get("jinja2_env_sync"), TEMPLATE_DIR)

    def _render(self, login_error=None, username=None, sync=False, **error_fields):
        return self.render_template(
            "native-login.html",
            sync=sync,
            next=url_escape(self.get_argument("next", default="")),
            username=username,
            login_error=login_error,
            custom_html=self.authenticator.custom_html,
            login_url=self.settings["login_url"],
            enable_signup=self.authenticator.enable_signup,
            two_factor_auth=self.authenticator.allow_2fa,
            authenticator_login_url=url_concat(
                self.authenticator.login_url(self.hub.base_url), {"next": self.get_argument("next", "")}
            ),
        )

    async def post(self) -> None:
        # As JupyterHub 6's LoginHandler.post: form fields only, the username stripped.
        data = {
            name: self.get_argument(name, strip=name == "username")
            for name in self.request.body_arguments
            if name != "_xsrf"
        }
        user = await self.login_user(data)
        if user:
            self._jupyterhub_user = user
            self.redirect(self.get_next_url(user))
            return
        username = data.get("username", "")
        error = "Invalid username or password."
        info = self.authenticator.get_user(username) if username else None
        if info is not None and info.is_valid_password(data.get("password", "")) and not info.is_authorized:
            error = f"User {username} has not been authorized by an administrator yet."
        self.set_status(403)
        self.finish(await self._render(login_error=error, username=username))


class SignUpHandler(NativeSignUpHandler):
    """nativeauthenticator 1.3.0's /hub/signup, with invites and telling authorized users the truth.

    - ``/hub/signup?invite=TOKEN`` (invites.py) says whom the invite is for; a signup as that
      name is authorized at once and uses the invite up, in the same commit as the new user.
      An invite that is unknown, used, expired or for another name is a 400 saying so, and
      nothing is created. Without an invite, the original's signup, which waits for an admin;
      but for a reserved name (invites.py) a 403 saying to ask the admin for the invite link.
    - A name the hub refuses (core/user_names.py) is a 400 saying why, naming the character at
      fault; the original said only "Something went wrong!".
    - The original answers "Your information has been sent to the admin." to everyone but admins
      when signup is not open, also to a user who is authorized at once and can log in now.
    """

    def get_result_message(self, user, *args, **kwargs) -> tuple[str, str]:
        if user is not None and user.is_authorized:
            return "alert-success", "The signup was successful! You can now log in."
        return super().get_result_message(user, *args, **kwargs)

    async def get(self) -> None:
        if not self.get_argument("invite", ""):
            await super().get()
            return
        invite = await self.usable_invite(None)
        if invite is not None:
            name, until = invite.username, f"{invite.expires_at:%Y-%m-%d %H:%M} UTC"
            await self.render_signup(
                "alert-info",
                f"This invitation lets you sign up as {name} until {until} and log in at once, "
                f"without waiting for an admin. Sign up as {name}.",
            )

    async def post(self) -> None:
        if not self.authenticator.enable_signup:
            raise web.HTTPError(404)
        typed = self.get_body_argument("username", "", strip=False)
        if refused := refused_name(typed):
            self.set_status(400)
            await self.render_signup("alert-danger", refused)
            return
        username = self.authenticator.normalize_username(typed)
        if not self.get_argument("invite", ""):
            if not self.authenticator.user_exists(username) and self.reserved(username):
                self.log.warning("refused a signup without an invite as the reserved name %s", username)
                self.set_status(403)
                await self.render_signup(
                    "alert-danger",
                    f"The user name {username} is reserved: an admin invited {username} or added them to a "
                    "workspace. Ask the admin for your invite link and sign up through it.",
                )
                return
            await super().post()
            return
        invite = await self.usable_invite(username)
        if invite is None:
            return
        password = self.get_body_argument("signup_password", "", strip=False)
        matches = password == self.get_body_argument("signup_password_confirmation", "", strip=False)
        taken = self.authenticator.user_exists(username)
        user = None
        if matches and not taken:
            invite.used_at = utcnow(with_tz=False)  # committed with the new user by create_user, or rolled back
            user = self.authenticator.create_user(
                username,
                password,
                email=self.get_body_argument("email", "", strip=False),
                has_2fa=bool(self.get_body_argument("2fa", "", strip=False)),
                is_authorized=True,
            )
            if user is None:
                self.db.rollback()
        alert, message = self.get_result_message(user, True, taken, matches, False)
        await self.render_signup(alert, message, user)

    def reserved(self, username: str) -> bool:
        """Whether ``username`` (normalised, not signed up) is reserved: it has an open invite, or it is a hub user."""
        return open_invite(self.db, username, utcnow(with_tz=False)) is not None or hub_user_exists(self.db, username)

    async def usable_invite(self, username: str | None) -> SignupInvite | None:
        """The invite of this request's ``invite`` argument if it may sign ``username`` up (None: anyone);
        else None, with the page saying why (400)."""
        if not self.authenticator.enable_signup:
            raise web.HTTPError(404)
        invite = find_invite(self.db, self.get_argument("invite"))
        problem = invite_problem(invite, utcnow(with_tz=False), username)
        if problem is None:
            return invite
        self.set_status(400)
        await self.render_signup("alert-danger", problem)
        return None

    async def render_signup(self, alert: str, message: str, user=None) -> None:
        """The signup page with ``message``, as the original renders it."""
        html = await self.render_template(
            "signup.html",
            ask_email=self.authenticator.ask_email_on_signup,
            result_message=message,
            alert=alert,
            two_factor_auth=self.authenticator.allow_2fa,
            two_factor_auth_user=user.has_2fa if user else "",
            two_factor_auth_value=user.otp_secret if user else "",
            recaptcha_key=self.authenticator.recaptcha_key,
            tos=self.authenticator.tos,
        )
        self.finish(html)


class InviteHandler(LocalBase):
    """/hub/invite: an admin (scope admin:users) makes a signup invite for one user name (invites.py).

    GET shows the form (``?user=NAME`` fills it in); POST makes the invite and shows its link once.
    A name the hub would refuse, or one that has signed up already, is a 400 saying so. A name whose
    signup waits for authorization was signed up without an invite, by whoever typed it: a 409 that
    shows it as such, with a button (POST ``action=delete-signup``) that deletes that pending signup,
    and only it (the hub user and its workspaces stay), so that the invite can be made then."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        add_template_dir(self.settings.get("jinja2_env"), EGS_TEMPLATE_DIR)

    @needs_scope("admin:users")
    async def get(self) -> None:
        typed = self.get_argument("user", "")
        username = self.authenticator.normalize_username(typed)
        if typed and not refused_name(typed) and self.pending_signup(username) is not None:
            await self.render_invite(username=username, error=self.pending_message(username), pending=True)
            return
        await self.render_invite(username=typed)

    @needs_scope("admin:users")
    async def post(self) -> None:
        typed = self.get_body_argument("username", "", strip=True)
        if refused := refused_name(typed):
            self.set_status(400)
            await self.render_invite(username=typed, error=refused)
            return
        username = self.authenticator.normalize_username(typed)
        if self.get_body_argument("action", "") == "delete-signup":
            await self.delete_signup(username)
            return
        signed_up = self.authenticator.get_user(username)
        if signed_up is not None and not signed_up.is_authorized:
            self.set_status(409)
            await self.render_invite(username=username, error=self.pending_message(username), pending=True)
            return
        if signed_up is not None:
            self.set_status(400)
            await self.render_invite(
                username=typed,
                error=f"{username} has signed up already; they log in at /hub/login. If they lost their "
                f"password, set a new one at /hub/change-password/{username}.",
            )
            return
        lifetime = timedelta(seconds=self.authenticator.invite_lifetime)
        token, expires_at = make_invite(self.db, username, self.current_user.name, utcnow(with_tz=False), lifetime)
        link = f"{self.request.protocol}://{self.request.host}{self.hub.base_url}signup?invite={token}"
        self.log.info("%s invited %s to sign up, until %s", self.current_user.name, username, expires_at)
        await self.render_invite(username=username, link=link, expires_at=f"{expires_at:%Y-%m-%d %H:%M}")

    def pending_signup(self, username: str) -> UserInfo | None:
        """``username``'s signup if it waits for authorization (it was made without an invite)."""
        signed_up = self.authenticator.get_user(username)
        return signed_up if signed_up is not None and not signed_up.is_authorized else None

    def pending_message(self, username: str) -> str:
        member = (
            f" {username} is a hub user already (an admin added them, to a workspace perhaps): authorizing "
            f"this signup would give whoever made it {username}'s workspaces."
            if hub_user_exists(self.db, username)
            else ""
        )
        return (
            f"{username} signed up without an invite and waits for authorization: whoever typed the name "
            f"may not be the person you mean to invite.{member} Delete this pending signup, then create the invite."
        )

    async def delete_signup(self, username: str) -> None:
        """Delete ``username``'s pending signup (its users_info row), not its hub user; 409 when it has none."""
        signed_up = self.authenticator.get_user(username)
        if signed_up is None or signed_up.is_authorized:
            self.set_status(409)
            why = " (they signed up and were authorized; they log in at /hub/login)" if signed_up else ""
            await self.render_invite(
                username=username, error=f"{username} has no pending signup to delete{why}. Create the invite."
            )
            return
        self.db.delete(signed_up)
        self.db.commit()
        self.log.warning("%s deleted the pending signup of %s", self.current_user.name, username)
        await self.render_invite(
            username=username, notice=f"Deleted the pending signup of {username}. Now create the invite."
        )

    async def render_invite(self, **context) -> None:
        html = await self.render_template(
            "egs-invite.html", lifetime_days=self.authenticator.invite_lifetime / 86400, **context
        )
        self.finish(html)


class AuthorizationAreaHandler(LocalBase):
    """nativeauthenticator's /hub/authorize, telling signups made without an invite apart.

    A signup through an invite is authorized at once; one that waits here was made without one, by
    whoever typed the name. When that name is a hub user already (a member an admin added), authorizing
    the signup gives its maker the member's workspaces: the row says so, and deletes the pending signup
    through /hub/invite instead of the original's Discard, which deletes the hub user as well."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        add_template_dir(self.settings.get("jinja2_env"), EGS_TEMPLATE_DIR)

    @needs_scope("admin:users")
    async def get(self) -> None:
        signups = self.db.query(UserInfo).order_by(UserInfo.username).all()
        names = [signup.username for signup in signups]
        hub_users = (
            {name for (name,) in self.db.query(orm.User.name).filter(orm.User.name.in_(names))} if names else set()
        )
        html = await self.render_template(
            "egs-authorize.html",
            ask_email=self.authenticator.ask_email_on_signup,
            signups=signups,
            invited=invited_names(self.db, names),
            hub_users=hub_users,
        )
        self.finish(html)


HANDLERS = {r"/login": LoginHandler, r"/signup": SignUpHandler, r"/authorize": AuthorizationAreaHandler}
EGS_HANDLERS = [(r"/invite", InviteHandler)]


class EGSAuthenticator(NativeAuthenticator):
    bootstrap_admin = Unicode(
        BOOTSTRAP_ADMIN,
        help="""Hub admin created on the first start, with the password from $EGS_ADMIN_PASSWORD
        or a generated one printed once.

        .. versionadded:: 0.1
        """,
    ).tag(config=True)

    invite_lifetime = Integer(
        int(INVITE_LIFETIME.total_seconds()),
        min=1,
        help="""Seconds a signup invite made at /hub/invite stays valid (default 604800, 7 days).

        Until then, the invite's link lets its user name sign up and log in without waiting for
        an admin at /hub/authorize, once.

        .. versionadded:: 0.2
        """,
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        create_invite_table(self.db.bind)
        self.create_bootstrap_admin()

    def normalize_username(self, username: str) -> str:
        """``username`` folded as the service folds member names (core/user_names.py), then ``username_map``
        as JupyterHub applies it: "café" in NFC and in NFD is one user."""
        name = fold_user_name(username)
        return self.username_map.get(name, name)

    def validate_username(self, username: str) -> bool:
        """The hub's and NativeAuthenticator's checks, and the service's (core/user_names.py): no invisible
        or text-direction character, and a name that folds to itself (what ``username_map`` maps to may not)."""
        return (
            fold_user_name(username) == username
            and user_name_problem(username) is None
            and super().validate_username(username)
        )

    def create_bootstrap_admin(self) -> None:
        if self.user_exists(self.bootstrap_admin):
            return
        password = os.environ.get("EGS_ADMIN_PASSWORD", "")
        generated = not password
        if generated:
            password = secrets.token_urlsafe(12)
        if len(password) < self.minimum_password_length:
            raise ValueError(f"EGS_ADMIN_PASSWORD must be at least {self.minimum_password_length} characters long")
        if self.create_user(self.bootstrap_admin, password, is_authorized=True) is None:
            raise ValueError(f"could not create the hub admin {self.bootstrap_admin!r}")
        shown = f"with the password {password}" if generated else "with the password from EGS_ADMIN_PASSWORD"
        print(
            f"\negs-hub: created the hub admin {self.bootstrap_admin!r} {shown}\n"
            "         (shown once; change it at /hub/change-password)\n",
            file=sys.stderr,
            flush=True,
        )

    def get_handlers(self, app) -> list[tuple]:
        native = [(route, HANDLERS.get(route, handler)) for route, handler in super().get_handlers(app)]
        return native + EGS_HANDLERS + proxy_errors.HANDLERS
