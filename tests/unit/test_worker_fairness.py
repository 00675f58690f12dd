"""Callers' recent use of the drain (docs/WORKER.md §Fair shares between callers)."""

from __future__ import annotations

import pytest

from worker.fairness import FORGET_BELOW, Usage

ALICE = ("alice", "fleet")
BOB = ("bob", "fleet")
CAROL = ("carol", "fleet")


def test_a_caller_not_seen_yet_has_used_nothing():
    assert Usage().of(ALICE, now=100.0) == 0.0
    assert Usage().of(None, now=100.0) == 0.0


def test_use_halves_every_half_life():
    use = Usage(half_life=60.0, quantum=0.1)
    use.charge(ALICE, 8.0, now=0.0)
    assert use.of(ALICE, now=60.0) == pytest.approx(4.0)
    assert use.of(ALICE, now=120.0) == pytest.approx(2.0)


def test_a_target_costs_at_least_one_quantum():
    use = Usage(quantum=0.1)
    use.charge(ALICE, 0.003, now=0.0)
    use.charge(BOB, 0.25, now=0.0)
    assert use.of(ALICE, now=0.0) == 0.1
    assert use.of(BOB, now=0.0) == 0.25


def test_callers_within_the_band_of_the_least_use_rank_equal_and_others_by_use():
    use = Usage(quantum=0.0, band=2.0)
    use.charge(ALICE, 1.0, now=0.0)
    use.charge(BOB, 2.5, now=0.0)
    use.charge(CAROL, 9.0, now=0.0)
    assert use.ranks([ALICE, BOB, CAROL, None], now=0.0) == {
        None: 0.0,  # a caller not known yet has used nothing: the least now
        ALICE: 0.0,
        BOB: 2.5,
        CAROL: 9.0,
    }
    assert use.ranks([ALICE, BOB, CAROL], now=0.0) == {ALICE: 0.0, BOB: 0.0, CAROL: 9.0}
    assert use.ranks([CAROL], now=0.0) == {CAROL: 0.0}  # alone, a caller has it all


def test_charges_add_up_after_decay():
    use = Usage(half_life=10.0, quantum=0.0)
    use.charge(ALICE, 4.0, now=0.0)
    use.charge(ALICE, 1.0, now=10.0)
    assert use.of(ALICE, now=10.0) == pytest.approx(3.0)


def test_callers_whose_use_has_decayed_away_are_forgotten():
    use = Usage(half_life=1.0, quantum=0.0)
    use.charge(ALICE, 1.0, now=0.0)
    use.charge(BOB, 1.0, now=30.0)
    use.prune(now=30.0)
    assert len(use) == 1 and use.of(ALICE, now=30.0) < FORGET_BELOW
