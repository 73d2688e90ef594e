"""Trait types of egs-hub's configuration, and the options that use them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from traitlets import HasTraits, TraitError
from traitlets.config import Config

from egs_hub.service.app import EGSService
from egs_hub.traits import Duration


class Options(HasTraits):
    horizon = Duration(timedelta(days=1))
    short = Duration(timedelta(minutes=5), maximum=timedelta(hours=1))


@pytest.mark.parametrize(
    ("value", "want"),
    [
        ("365d", timedelta(days=365)),
        ("1d2h30m", timedelta(days=1, hours=2, minutes=30)),
        ("2w", timedelta(weeks=2)),
        (86400, timedelta(days=1)),
        ("90", timedelta(seconds=90)),
        (timedelta(hours=3), timedelta(hours=3)),
        (timedelta(days=3650), timedelta(days=3650)),
    ],
)
def test_a_duration_is_read_as_the_api_writes_durations(value, want):
    options = Options(horizon=value)
    assert options.horizon == want


@pytest.mark.parametrize(
    ("value", "want_message"),
    [
        ("a year", "horizon 'a year' is not a duration"),
        (0, "horizon must be longer than zero"),
        (1.5, "horizon must be a duration"),
        (None, "horizon must be a duration"),
        ("3651d", "horizon must be at most ten years"),
        (timedelta(days=3651), "horizon must be longer than zero and at most 3650d, not 3651d"),
        (timedelta(seconds=-1), "at most 3650d, not -1 day, 23:59:59"),
    ],
)
def test_a_duration_out_of_range_is_refused_naming_the_option(value, want_message):
    with pytest.raises(TraitError, match=want_message):
        Options(horizon=value)


def test_a_duration_has_its_own_maximum():
    assert Options().short == timedelta(minutes=5)
    assert Options(short="1h").short == timedelta(hours=1)
    with pytest.raises(TraitError, match="short must be longer than zero and at most 1h, not 1h1s"):
        Options(short=3601)


def test_max_start_after_defaults_to_a_year_and_is_configurable():
    assert EGSService().max_start_after == timedelta(days=365)
    config = Config()
    config.EGSService.max_start_after = "30d"
    assert EGSService(config=config).max_start_after == timedelta(days=30)
    with pytest.raises(TraitError, match="max_start_after must be at most ten years"):
        EGSService(max_start_after="4000d")


def test_the_queue_order_defaults_to_fair_share_first_and_refuses_bad_weights():
    service = EGSService()
    assert (service.queue_fair_share_s, service.queue_size_s_per_gpu_hour) == (None, 0.0)
    assert EGSService(queue_fair_share_s=3600, queue_size_s_per_gpu_hour=600).queue_fair_share_s == 3600
    with pytest.raises(TraitError, match="queue_size_s_per_gpu_hour must be a finite number of seconds >= 0, not -1"):
        EGSService(queue_size_s_per_gpu_hour=-1)
    with pytest.raises(TraitError, match="queue_fair_share_s must be a finite number of seconds >= 0, not inf"):
        EGSService(queue_fair_share_s=float("inf"))
