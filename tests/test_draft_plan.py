"""The draft method's decisions on given costs, without a model: every cost counted."""

from __future__ import annotations

import pytest

from pyaccel import CostModel
from pyaccel.methods.draft import probe_pays

# A CPU-like curve (2 tokens cost 1.7 single tokens) and a GPU-like one.
CPU = CostModel.fixed([1.0, 1.7, 2.3, 2.9, 3.4, 4.0, 5.5, 7.0, 7.5, 8.0, 8.3, 8.4, 8.5, 8.6, 8.7, 8.8])
FLAT = CostModel.fixed([1.0 + 0.02 * b for b in range(16)])


def _first_probe(costs: CostModel, lag: int, draft_cost: float = 0.5, catch: float = 0.2,
                 alpha: float = 0.5) -> int:
    """The first idle step at which a probe is allowed."""
    for idle in range(1, 100_000):
        if probe_pays(costs, 0, lag, idle, draft_cost, catch, [alpha] * 8, 2, 0.02):
            return idle
    return 100_000


def test_a_long_catch_up_delays_the_probe_in_proportion() -> None:
    # net cost = lag * 0.2 + 2 * 0.5 + (t[3] - t[1]) - (0.5 + 0.25), allowed at <= 0.02 * idle
    for lag in (0, 10, 100, 1000):
        net = lag * 0.2 + 1.0 + 1.3 - 0.75
        assert _first_probe(CPU, lag) == pytest.approx(net / 0.02, abs=1.0)
    assert _first_probe(CPU, 1000) > 10 * _first_probe(CPU, 10)


def test_probing_costs_at_most_its_share_of_the_idle_time() -> None:
    for lag in (0, 50, 500):
        idle = _first_probe(CPU, lag)
        net = lag * 0.2 + 2 * 0.5 + (2.3 - 1.0) - 0.75
        assert net <= 0.02 * idle + 1e-9


def test_cheap_verification_and_good_acceptance_probe_sooner() -> None:
    assert _first_probe(FLAT, 100) < _first_probe(CPU, 100)
    assert _first_probe(CPU, 100, alpha=0.9) < _first_probe(CPU, 100, alpha=0.1)


def test_a_probe_that_wins_more_than_it_costs_runs_at_once() -> None:
    assert probe_pays(FLAT, 0, 0, 1, 0.01, 0.01, [0.99] * 8, 2, 0.02)
    assert not probe_pays(FLAT, 0, 0, 1000, 0.01, 0.01, [0.99] * 8, 0, 0.02)  # no probe length, no probe
