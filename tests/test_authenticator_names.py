"""The hub's authenticator and the service fold and check user names with one function (core/user_names.py).

Issue 45: signup, login and /hub/invite (EGSAuthenticator) and the service's members must agree on
what a name is, or "café" in NFD is one user at the hub and another in a workspace.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from jupyterhub.orm import new_session_factory

from egs_hub.authenticator import EGSAuthenticator
from egs_hub.core.user_names import fold_user_name, user_name_problem

TYPED = st.text(
    st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from("aE\u0301\u0130\u212a\ufb01\u00a0\u202e\u200b\u00ad\u3164\u2800\ufe0f,/ %.?"),
    ),
    max_size=16,
)


@pytest.fixture(scope="module")
def authenticator() -> Iterator[EGSAuthenticator]:
    session = new_session_factory("sqlite://")()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EGS_ADMIN_PASSWORD", "a-long-enough-password")
        yield EGSAuthenticator(db=session)
    session.close()


@given(typed=TYPED)
@example(typed="Cafe\u0301")
@example(typed="eve\u202ebob")
@example(typed="\u212aate")
def test_the_hub_folds_and_checks_names_as_the_service_does(authenticator, typed):
    name = authenticator.normalize_username(typed)
    assert name == fold_user_name(typed)
    assert authenticator.validate_username(name) == (user_name_problem(typed) is None)


def test_a_name_the_hub_keeps_is_valid_as_it_is(authenticator):
    assert authenticator.normalize_username("ÉMILE") == "émile"
    assert authenticator.validate_username("émile")
    assert not authenticator.validate_username("Émile")  # not folded: the hub never keeps it so
    assert not authenticator.validate_username("eve\u202ebob")
