"""The embedded default's login: NativeAuthenticator, with two additions.

- The first start creates the hub admin ``admin`` with the password from
  ``EGS_ADMIN_PASSWORD``, or a generated one printed once.
- A user an admin already created in the hub (for example by adding them to a
  slice) may sign up at /hub/signup without waiting for approval; anyone else
  waits until an admin authorizes them at /hub/authorize.

And two repairs of nativeauthenticator 1.3.0's pages: ``LoginHandler`` makes
/hub/login work on JupyterHub 6; ``SignUpHandler`` tells a pre-authorized user
that they can log in now (see their docstrings).
"""

from __future__ import annotations

import os
import secrets
import sys

from jinja2 import ChoiceLoader, FileSystemLoader
from jupyterhub import orm
from nativeauthenticator import NativeAuthenticator
from nativeauthenticator.handlers import TEMPLATE_DIR
from nativeauthenticator.handlers import LoginHandler as NativeLoginHandler
from nativeauthenticator.handlers import SignUpHandler as NativeSignUpHandler
from tornado.escape import url_escape
from tornado.httputil import url_concat
from traitlets import Unicode

BOOTSTRAP_ADMIN = "admin"


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
        env = self.settings.get("jinja2_env_sync")
        if env is not None and not getattr(env, "egs_native_templates", False):
            env.loader = ChoiceLoader([env.loader, FileSystemLoader([TEMPLATE_DIR])])
            env.egs_native_templates = True

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
    """nativeauthenticator 1.3.0's /hub/signup, telling pre-authorized users the truth.

    The original answers "Your information has been sent to the admin." to everyone
    but admins when signup is not open, although a user the hub already knew (for
    example, added to a slice) is authorized at once and can log in now.
    """

    def get_result_message(self, user, *args, **kwargs) -> tuple[str, str]:
        if user is not None and user.is_authorized:
            return "alert-success", "The signup was successful! You can now log in."
        return super().get_result_message(user, *args, **kwargs)


HANDLERS = {r"/login": LoginHandler, r"/signup": SignUpHandler}


class EGSAuthenticator(NativeAuthenticator):
    bootstrap_admin = Unicode(
        BOOTSTRAP_ADMIN,
        help="""Hub admin created on the first start, with the password from $EGS_ADMIN_PASSWORD
        or a generated one printed once.

        .. versionadded:: 0.1
        """,
    ).tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.create_bootstrap_admin()

    def create_bootstrap_admin(self) -> None:
        if self.user_exists(self.bootstrap_admin):
            return
        password = os.environ.get("EGS_ADMIN_PASSWORD", "")
        generated = not password
        if generated:
            password = secrets.token_urlsafe(12)
        if len(password) < self.minimum_password_length:
            raise ValueError(f"EGS_ADMIN_PASSWORD must be at least {self.minimum_password_length} characters long")
        if self.create_user(self.bootstrap_admin, password) is None:
            raise ValueError(f"could not create the hub admin {self.bootstrap_admin!r}")
        shown = f"with the password {password}" if generated else "with the password from EGS_ADMIN_PASSWORD"
        print(
            f"\negs-hub: created the hub admin {self.bootstrap_admin!r} {shown}\n"
            "         (shown once; change it at /hub/change-password)\n",
            file=sys.stderr,
            flush=True,
        )

    def get_handlers(self, app) -> list[tuple]:
        return [(route, HANDLERS.get(route, handler)) for route, handler in super().get_handlers(app)]

    def get_authed_users(self) -> set[str]:
        hub_users = {name for (name,) in self.db.query(orm.User.name)}
        return super().get_authed_users() | hub_users
