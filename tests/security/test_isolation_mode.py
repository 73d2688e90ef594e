"""Issue 45: the isolation mode is chosen once and handed to both the spawner and the service (with the one
home of mode none), system-users is refused where it cannot work, and the data directory is closed at
start (prepare's checks; the end-to-end tests run the hubs)."""

from __future__ import annotations

import os
import stat

import pytest
from traitlets import TraitError
from traitlets.config import Config

from egs_hub import system_users
from egs_hub.embedded import SetupError, choose_isolation, close_data_dir, configure_hub
from egs_hub.service.app import EGSService

from ..test_cli import hub_env


def config(**egs_service) -> Config:
    c = Config()
    for name, value in egs_service.items():
        c.EGSService[name] = value
    return c


@pytest.fixture
def not_root(monkeypatch):
    monkeypatch.setattr(system_users.os, "geteuid", lambda: 4242)


@pytest.fixture
def root(monkeypatch):
    monkeypatch.setattr(system_users.os, "geteuid", lambda: 0)


@pytest.mark.parametrize("mode", system_users.MODES)
def test_the_spawner_and_the_service_get_the_same_mode_and_home(tmp_path, mode):
    c = Config()
    configure_hub(c, hub_env(tmp_path, EGS_ISOLATION=mode, EGS_HOME_DIR_TEMPLATE="/srv/homes/{username}"))
    (service,) = c.JupyterHub.services
    assert c.SliceLocalSpawner.isolation == service["environment"]["EGS_ISOLATION"] == mode
    assert c.SliceLocalSpawner.home_dir_template == service["environment"]["EGS_HOME_DIR_TEMPLATE"]
    assert service["environment"]["EGS_HOME_DIR_TEMPLATE"] == "/srv/homes/{username}"


def test_the_mode_is_the_flag_or_the_config_files_else_the_default(root):
    assert choose_isolation("none", Config()) == "none"
    assert choose_isolation(None, config(isolation="none")) == "none"
    assert choose_isolation("none", config(isolation="NONE")) == "none"
    assert choose_isolation(None, Config()) == "system-users"  # as root


def test_a_mode_chosen_twice_two_ways_is_refused_naming_both():
    with pytest.raises(SetupError, match=r"--isolation = none, c.EGSService.isolation = system-users"):
        choose_isolation("none", config(isolation="system-users"))
    spawner = Config()
    spawner.SliceLocalSpawner.isolation = "none"
    with pytest.raises(
        SetupError, match=r"c.EGSService.isolation = system-users, c.SliceLocalSpawner.isolation = none"
    ):
        choose_isolation(None, Config({**config(isolation="system-users"), **spawner}))


def test_system_users_needs_root(not_root):
    assert choose_isolation(None, Config()) == "none"  # the default for a normal user
    with pytest.raises(SetupError, match=r"isolation system-users makes a system account per member .* needs root"):
        choose_isolation("system-users", Config())
    with pytest.raises(TraitError, match=r"EGSService.isolation: isolation system-users .* needs root"):
        EGSService(config=config(isolation="system-users"))
    with pytest.raises(system_users.AccountError, match="needs root"):
        system_users.Isolation("system-users", "/home/{username}")


def test_the_dashboard_notice_is_for_members_run_here_as_the_service():
    assert EGSService(config=config(isolation="system-users")).isolation_notice() is None
    assert EGSService(config=config(isolation="none", local_gpus=False)).isolation_notice() is None  # the chart's
    refused = EGSService(config=config(isolation="none")).isolation_notice()
    allowed = EGSService(config=config(isolation="none", allow_unisolated_commands=True)).isolation_notice()
    assert "trusted members only" in refused and "refused unless c.EGSService.allow_unisolated_commands" in refused
    assert "command endpoints are allowed" in allowed


def test_an_open_data_directory_is_closed_saying_so(tmp_path, capsys):
    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    os.chmod(data_dir, 0o755)
    close_data_dir(str(data_dir))
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700
    assert f"the data directory {data_dir} was open to other users (mode 755)" in capsys.readouterr().err
    close_data_dir(str(data_dir))  # closed: nothing to say
    assert capsys.readouterr().err == ""


def test_a_data_directory_of_another_user_is_refused(tmp_path):
    data_dir = tmp_path / "theirs"
    data_dir.mkdir(mode=0o700)
    os.chown(data_dir, 65534, 65534)
    with pytest.raises(SetupError, match=f"the data directory {data_dir} belongs to uid 65534, not to uid 0"):
        close_data_dir(str(data_dir))
    assert stat.S_IMODE(data_dir.stat().st_mode) == 0o700 and data_dir.stat().st_uid == 65534
