"""Virtual times of start-time fair queuing (docs/WORKER.md §Fair shares between callers)."""

from __future__ import annotations

import pytest

from worker.fairness import QUANTUM, Ledger, charge

ALICE = ("alice", "user")
BOB = ("bob", "user")


@pytest.mark.parametrize(
    ("seconds", "quanta"),
    [
        (0.0, 1),
        (0.001, 1),
        (QUANTUM, 1),
        (QUANTUM * 1.01, 2),
        (QUANTUM * 1.9, 2),
        (QUANTUM * 40, 40),
    ],
)
def test_a_target_costs_whole_quanta_at_least_one(seconds, quanta):
    assert charge(seconds) == quanta * QUANTUM


def test_a_start_charges_one_quantum_at_once_and_the_store_the_rest():
    led = Ledger()
    led.start(ALICE)
    assert led.ahead(ALICE) == QUANTUM
    led.finish(ALICE, 1.0)
    assert led.ahead(ALICE) == 1.0


def test_a_put_back_target_costs_nothing():
    led = Ledger()
    led.start(BOB)
    led.start(ALICE)
    led.refund(ALICE)
    assert led.vtime().get(ALICE, led.floor) == led.floor


def test_a_caller_back_from_away_starts_at_the_floor_with_no_credit_banked():
    led = Ledger()
    for _ in range(8):
        led.start(ALICE)
        led.finish(ALICE, 2 * QUANTUM)
    led.start(BOB)  # bob was away: his start tag is the floor (alice's last), not 0
    assert led.floor == 14 * QUANTUM and led.ahead(BOB) == QUANTUM
    assert led.ahead(ALICE) == 2 * QUANTUM  # her last target, from the start tag they share


def test_a_lead_decays_as_the_others_catch_up_and_callers_at_the_floor_are_forgotten():
    led = Ledger()
    led.start(ALICE)
    led.finish(ALICE, 8 * QUANTUM)  # alice is 8 quanta ahead
    for _ in range(7):  # bob starts 7 one-quantum targets
        led.start(BOB)
    assert led.ahead(ALICE) == pytest.approx(2 * QUANTUM)
    led.start(ALICE)  # her start tag is her own lead: bob is at the floor, forgotten
    assert led.floor == 8 * QUANTUM and led.vtime() == {ALICE: 9 * QUANTUM}
