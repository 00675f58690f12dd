"""The render pool's memory budget as a rule over sizes (docs/SECURITY.md §The render pool's
memory budget): which processes go when the pool is over, without any process."""

from __future__ import annotations

from sift.fetch import renderbudget
from sift.fetch.renderbudget import victims

MIB = 1024 * 1024


def test_within_the_budget_nothing_is_killed():
    assert victims({1: 40 * MIB, 2: 40 * MIB}, [], 20 * MIB, 128 * MIB) == ([], [])


def test_idle_children_are_recycled_first_largest_first():
    sizes = {1: 30 * MIB, 2: 60 * MIB, 3: 50 * MIB}
    assert victims(sizes, [1, 2], 20 * MIB, 128 * MIB) == ([2], [])


def test_a_warm_idle_child_of_ordinary_size_outlives_a_bomb_past_its_share():
    sizes = {1: 20 * MIB, 2: 20 * MIB, 3: 120 * MIB}
    assert victims(sizes, [1, 2], 22 * MIB, 128 * MIB) == ([], [3])


def test_one_warm_idle_child_is_kept_and_its_size_comes_out_of_the_busy_shares():
    # The bomb's share is 128 - 22 - 20 = 86 MiB: at 100 it goes, the warm child stays.
    sizes = {1: 20 * MIB, 2: 20 * MIB, 3: 100 * MIB}
    assert victims(sizes, [1, 2], 22 * MIB, 128 * MIB) == ([], [3])
    # At 80 it is within its share: the other idle child goes, the warm one last.
    sizes = {1: 20 * MIB, 2: 25 * MIB, 3: 80 * MIB}
    assert victims(sizes, [1, 2], 22 * MIB, 128 * MIB) == ([2], [])


def test_idle_children_within_their_share_go_when_busy_ones_are_within_theirs():
    sizes = {1: 30 * MIB, 2: 30 * MIB, 3: 30 * MIB, 4: 30 * MIB}
    assert victims(sizes, [1, 2], 20 * MIB, 128 * MIB) == ([1], [])


def test_past_the_idle_children_the_largest_busy_process_is_killed():
    sizes = {1: 20 * MIB, 2: 150 * MIB, 3: 25 * MIB}
    assert victims(sizes, [], 20 * MIB, 128 * MIB) == ([], [2])


def test_a_busy_process_within_its_fair_share_is_never_killed():
    # Four busy children of 30 MiB: 140 MiB with the server, over 128, but each is within its
    # share (108 / 4 = 27 is below 30, so the largest goes; then 3 x 30 + 20 fits).
    sizes = {1: 30 * MIB, 2: 30 * MIB, 3: 30 * MIB, 4: 30 * MIB}
    idle, busy = victims(sizes, [], 20 * MIB, 128 * MIB)
    assert idle == [] and len(busy) == 1
    # A small step beside a large one: only the large one goes.
    assert victims({1: 10 * MIB, 2: 120 * MIB}, [], 20 * MIB, 128 * MIB) == ([], [2])


def test_near_its_budget_the_pool_is_sampled_five_times_as_often():
    budget = 128 * MIB
    assert renderbudget.interval(90 * MIB, budget) == renderbudget.SAMPLE_EVERY
    assert renderbudget.interval(97 * MIB, budget) == renderbudget.SAMPLE_NEAR
    assert renderbudget.SAMPLE_EVERY == 5 * renderbudget.SAMPLE_NEAR
