"""MIG instances (core/sharing.py): profiles, layouts, GPU-equivalents, shapes that name them,
and the planner's rules over an inventory with whole GPUs and instances."""

from __future__ import annotations

import dataclasses
from fractions import Fraction

import pytest

from egs_hub.core import sharing
from egs_hub.core.errors import PolicyViolation
from egs_hub.core.model import Node, Shape, SlicePolicy
from egs_hub.core.planner import plan, unit_equivalents, unservable_reason
from egs_hub.core.policy import approval_reasons, check_sharing
from egs_hub.core.sharing import LayoutError, check_layout, equivalents, requested_profile

from .builders import NOW, at, booking, node, req, snap, spec

# One H100 split into seven 1g.10gb instances, and a whole 8-GPU H100 node.
MIG = Node("m1:1g.10gb", "c1", Shape("H100", 80, 7, "1g.10gb"), tuple(f"MIG-m1-{k}" for k in range(7)))
WHOLE = node("h1")
OPEN = SlicePolicy(max_active_gprs=20)


@pytest.mark.parametrize(
    ("model", "profile", "want"),
    [
        ("H100", None, Fraction(1)),
        ("H100", "1g.10gb", Fraction(1, 7)),
        ("H100", "3g.40gb", Fraction(3, 7)),
        ("H100", "7g.80gb", Fraction(1)),
        ("A100", "1g.10gb+me", Fraction(1, 7)),
        ("A30", "1g.6gb", Fraction(1, 4)),
        ("a30", "2g.12gb", Fraction(1, 2)),
    ],
)
def test_an_instance_counts_as_its_compute_slices_over_its_gpus(model, profile, want):
    assert equivalents(model, profile) == want
    assert (want * sharing.PARTS).denominator == 1  # a whole number of parts for every profile


@pytest.mark.parametrize("profile", ["1g", "1g10gb", "8g.80gb", "0g.10gb", "1g.0gb", "MIG 1g.10gb", "1G.10GB"])
def test_a_name_that_is_not_a_profile_is_refused(profile):
    with pytest.raises(ValueError, match="is not a MIG profile"):
        equivalents("H100", profile)


@pytest.mark.parametrize(
    "layout",
    [{"1g.10gb": 7}, {"3g.40gb": 1, "4g.40gb": 1}, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}, {"7g.80gb": 1}],
)
def test_layouts_an_h100_can_hold(layout):
    check_layout("H100", 80, layout)


@pytest.mark.parametrize(
    ("model", "memory", "layout", "why"),
    [
        ("H100", 80, {}, "at least one profile"),
        ("H100", 80, {"1g.10gb": 8}, "8 compute slices; a H100 GPU has 7"),
        ("H100", 80, {"3g.40gb": 2, "1g.10gb": 1}, "90 GB; a H100 GPU has 80 GB"),
        ("A30", 24, {"1g.6gb": 5}, "5 compute slices; a A30 GPU has 4"),
        ("H100", 80, {"1g.10gb": 0}, "whole number from 1, not 0"),
        ("H100", 80, {"1g.10gb": True}, "whole number from 1, not True"),
        ("H100", 80, {"one": 1}, "'one' is not a MIG profile"),
        ("H100", 80, {7: 1}, "7 is not a MIG profile"),
    ],
)
def test_layouts_a_gpu_cannot_hold_are_refused_saying_why(model, memory, layout, why):
    with pytest.raises(LayoutError, match=why):
        check_layout(model, memory, layout)


@pytest.mark.parametrize(
    ("shape", "want"),
    [
        (None, None),
        ("H100", None),
        ("H100-80GB x8", None),
        ("H100-80GB 1g.10gb", "1g.10gb"),
        ("H100 3G.40GB", "3g.40gb"),
        ("H100-80GB 1g.10gb x14", "1g.10gb"),  # the shape's name, as the inventory lists it
        ("1g.10gb", None),  # a profile alone names no GPU type
    ],
)
def test_the_profile_a_gpr_shape_names(shape, want):
    assert requested_profile(shape) == want


@pytest.mark.parametrize(
    ("wanted", "whole", "instances"),
    [
        (None, True, False),  # any shape is any whole-GPU shape: never instances
        ("H100", True, False),
        ("H100-80GB", True, False),
        ("H100-80GB 1g.10gb", False, True),
        ("h100  1g.10gb", False, True),
        ("H100-80GB 1g.10gb x7", False, True),
        ("H100-80GB 3g.40gb", False, False),
        ("A100 1g.10gb", False, False),
    ],
)
def test_a_shape_with_a_profile_matches_only_requests_naming_it(wanted, whole, instances):
    assert WHOLE.shape.matches(wanted) is whole
    assert MIG.shape.matches(wanted) is instances


def test_a_mig_shape_is_named_with_its_profile():
    assert MIG.shape.name == "H100-80GB 1g.10gb x7" and MIG.shape.gpu_type == "H100-80GB 1g.10gb"


def test_instances_go_to_requests_naming_their_profile_and_whole_gpus_to_the_others():
    snapshot = snap(
        MIG,
        WHOLE,
        queue=[req(1, gpus=3, shape="H100-80GB 1g.10gb"), req(2, gpus=8), req(3, gpus=2, shape="H100")],
        policies={"team": OPEN},
    )
    estimates = plan(snapshot, NOW).estimates
    assert estimates[1].start == NOW and set(estimates[1].placement.gpus) <= set(MIG.gpus)
    assert estimates[1].placement.count == 3 and estimates[1].placement.nodes == (MIG.name,)
    assert estimates[2].start == NOW and estimates[2].placement.nodes == (WHOLE.name,)
    assert estimates[3].start == at(1)  # the whole node is taken; the instances are not for it


def test_more_instances_than_a_gpu_has_wait_for_them_and_more_than_there_are_never_start():
    snapshot = snap(
        MIG,
        bookings=[booking(90, MIG.gpus[:5], until=2)],
        queue=[req(1, gpus=3, shape="H100 1g.10gb")],
        policies={"team": OPEN},
    )
    assert plan(snapshot, NOW).estimates[1].start == at(2)
    assert unservable_reason(spec(gpus=8, shape="H100 1g.10gb"), (MIG,), frozenset()) == (
        "8 MIG instances of shape 'H100 1g.10gb' cannot be placed: the inventory has 1 such node(s) with up to "
        "7 MIG instances each"
    )


def test_a_slice_quota_counts_instances_as_their_share_of_a_gpu():
    """max_gpus 1 is seven 1g.10gb instances at once: the eighth waits for one of them."""
    one_gpu = SlicePolicy(max_gpus=1, max_active_gprs=20)
    eight = [req(i, gpus=1, shape="H100 1g.10gb", hours=i) for i in range(1, 9)]
    second = Node("m2:1g.10gb", "c1", Shape("H100", 80, 7, "1g.10gb"), tuple(f"MIG-m2-{k}" for k in range(7)))
    estimates = plan(snap(MIG, second, queue=eight, policies={"team": one_gpu}), NOW).estimates
    assert [estimates[i].start for i in range(1, 8)] == [NOW] * 7
    assert estimates[8].start == at(1)  # when the first ends, though free instances were there


def test_a_quota_counts_a_booking_of_instances_as_its_share_of_a_gpu():
    one_gpu = SlicePolicy(max_gpus=1, max_active_gprs=20)
    snapshot = snap(
        MIG,
        WHOLE,
        bookings=[booking(90, MIG.gpus[:3], until=2)],
        queue=[req(1, gpus=1, shape="H100"), req(2, gpus=4, shape="H100 1g.10gb")],
        policies={"team": one_gpu},
    )
    estimates = plan(snapshot, NOW).estimates
    assert estimates[1].start == at(2)  # 3/7 + 1 is over 1 GPU
    assert estimates[2].start == NOW  # 3/7 + 4/7 is 1 GPU


def test_approval_counts_gpu_equivalents_and_says_so_in_gpus():
    asked = spec(gpus=14, shape="H100 1g.10gb")
    units = 14 * unit_equivalents(asked, (MIG,))
    assert units == pytest.approx(2.0)
    assert approval_reasons(asked, units, SlicePolicy(max_gpus=1)) == ["2 GPUs is over the slice's quota of 1 GPUs"]
    assert approval_reasons(asked, 3 * unit_equivalents(asked, (MIG,)), SlicePolicy(auto_approve_max_gpus=0)) == [
        "0.43 GPUs is over the auto-approval limit of 0"
    ]


def test_fractions_name_only_the_units_that_are_parts_of_a_gpu():
    assert sharing.fractions([MIG, WHOLE]) == {g: pytest.approx(1 / 7) for g in MIG.gpus}


# Time-sliced GPUs: a node of 2 H100s shared by up to 4 GPRs each.

SHARED = Node(
    "t1:shared", "c1", Shape("H100", 80, 8, replicas=4), tuple(f"GPU-t1-{g}::{k}" for g in range(2) for k in range(4))
)
SHARING = SlicePolicy(max_active_gprs=20, gpu_sharing=True)


@pytest.mark.parametrize(
    ("wanted", "share", "want"),
    [
        (None, 0.25, True),
        ("H100", 0.25, True),
        ("H100-80GB", 0.1, True),
        (None, 0.3, False),  # a quarter of a GPU is less than asked
        ("A100", 0.25, False),
        (None, None, False),  # whole GPUs never get shares
        ("H100", None, False),
        ("H100-80GB shared/4", None, True),  # named by its type, as the inventory lists it
        ("H100-80GB shared/4 x8", 0.25, True),  # a share of the shape a wait-time row names
        ("H100-80GB shared/4", 0.5, False),
    ],
)
def test_a_time_sliced_shape_serves_shares_no_larger_than_its_own(wanted, share, want):
    assert SHARED.shape.serves(wanted, share) is want
    assert WHOLE.shape.serves(wanted, share) is (share is None and WHOLE.shape.matches(wanted))
    assert MIG.shape.serves(wanted, 0.1) is False  # a share is never a MIG instance


def test_a_share_counts_as_its_part_of_a_gpu():
    assert SHARED.shape.equivalents == Fraction(1, 4) and SHARED.shape.name == "H100-80GB shared/4 x8"
    assert sharing.check_replicas(4) == 4 and 8 in sharing.REPLICAS and 11 not in sharing.REPLICAS
    for bad in (1, 11, 0, True, "4", 2.0 + 0.5):
        with pytest.raises(LayoutError, match="time_slicing must be a number of shares, one of 2, 3, 4"):
            sharing.check_replicas(bad)


def test_shares_go_to_shared_gpus_four_at_a_time_and_whole_gpus_to_the_rest():
    shares = [req(i, gpus=1, hours=i) for i in range(1, 10)]
    shares = [dataclasses.replace(r, spec=dataclasses.replace(r.spec, gpu_share=0.25)) for r in shares]
    snapshot = snap(SHARED, WHOLE, queue=[*shares, req(20, gpus=8)], policies={"team": SHARING})
    estimates = plan(snapshot, NOW).estimates
    assert [estimates[i].start for i in range(1, 9)] == [NOW] * 8
    assert estimates[9].start == at(1) and estimates[9].placement.nodes == (SHARED.name,)
    assert estimates[20].start == NOW and estimates[20].placement.nodes == (WHOLE.name,)
    placed = [g for i in range(1, 9) for g in estimates[i].placement.gpus]
    assert sorted(placed) == sorted(SHARED.gpus)  # every share once


def test_a_slice_quota_counts_shares_as_their_part_of_a_gpu():
    one_gpu = SlicePolicy(max_gpus=1, max_active_gprs=20, gpu_sharing=True)
    shares = [req(i, gpus=1, hours=i) for i in range(1, 6)]
    shares = [dataclasses.replace(r, spec=dataclasses.replace(r.spec, gpu_share=0.25)) for r in shares]
    estimates = plan(snap(SHARED, queue=shares, policies={"team": one_gpu}), NOW).estimates
    assert [estimates[i].start for i in range(1, 6)] == [NOW] * 4 + [at(1)]


def test_sharing_is_the_slice_policy_s_to_allow():
    asked = dataclasses.replace(spec(gpus=1), gpu_share=0.5)
    check_sharing(asked, SHARING)
    check_sharing(spec(gpus=1), SlicePolicy())
    with pytest.raises(PolicyViolation, match="slice team's policy does not allow shared GPUs") as refused:
        check_sharing(asked, SlicePolicy())
    assert refused.value.field == "gpu_share"
