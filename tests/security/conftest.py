"""The security suite: every attack found on egs-hub, as a test that the attacker loses.

Each test here failed on the code before its fix. The end-to-end fixtures are the service tests'
(one real egs-hub per database kind, tests/service/conftest.py), so every attack is tried on SQLite
and PostgreSQL.
"""

from ..service.conftest import admin, hub, make_slice, user  # noqa: F401
