"""The embedded default's login: NativeAuthenticator, with two additions.

- The first start creates the hub admin ``admin`` with the password from
  ``EGS_ADMIN_PASSWORD``, or a generated one printed once.
- A user an admin already created in the hub (for example by adding them to a
  slice) may sign up at /hub/signup without waiting for approval; anyone else
  waits until an admin authorizes them at /hub/authorize.
"""

from __future__ import annotations

import os
import secrets
import sys

from jupyterhub import orm
from nativeauthenticator import NativeAuthenticator
from traitlets import Unicode

BOOTSTRAP_ADMIN = "admin"


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
            raise ValueError(
                f"EGS_ADMIN_PASSWORD must be at least {self.minimum_password_length} characters long"
            )
        if self.create_user(self.bootstrap_admin, password) is None:
            raise ValueError(f"could not create the hub admin {self.bootstrap_admin!r}")
        shown = f"with the password {password}" if generated else "with the password from EGS_ADMIN_PASSWORD"
        print(
            f"\negs-hub: created the hub admin {self.bootstrap_admin!r} {shown}\n"
            "         (shown once; change it at /hub/change-password)\n",
            file=sys.stderr,
            flush=True,
        )

    def get_authed_users(self) -> set[str]:
        hub_users = {name for (name,) in self.db.query(orm.User.name)}
        return super().get_authed_users() | hub_users
