"""Tuning knobs from a method spec: `lookup:stats_decay=0.95` sets a field of the method's
tuning dataclass (nested ones included), unknown names fail clearly, and no knob shadows
a constructor argument."""

from __future__ import annotations

import inspect
from dataclasses import fields

import pytest

from pyaccel.methods import make_method
from pyaccel.methods.auto.proposer import Auto, AutoTuning
from pyaccel.methods.lookahead import Lookahead
from pyaccel.methods.lookahead.sizing import LookaheadTuning
from pyaccel.methods.lookup import LookupTuning, PromptLookup
from pyaccel.methods.lookup.rewrites import FollowerTuning
from pyaccel.methods.medusa import Medusa
from pyaccel.methods.medusa.proposer import MedusaTuning
from pyaccel.methods.tuning import field_names, replace_fields, with_tuning_options

METHODS = [(PromptLookup, LookupTuning), (Lookahead, LookaheadTuning), (Medusa, MedusaTuning), (Auto, AutoTuning)]


def test_replace_fields_reaches_nested_tuning() -> None:
    tuned = replace_fields(LookupTuning(), "lookup tuning", stats_decay=0.9, min_seen=5)
    assert tuned.stats_decay == 0.9
    assert tuned.follower == FollowerTuning(min_seen=5)
    assert tuned.context_cap == LookupTuning().context_cap
    assert LookupTuning().stats_decay == 0.98  # the original is untouched


def test_field_names_cover_nested_fields() -> None:
    names = field_names(LookupTuning)
    assert {f.name for f in fields(LookupTuning)} <= names
    assert {f.name for f in fields(FollowerTuning)} <= names


def test_unknown_knob_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown lookup tuning bogus: choose from .*stats_decay"):
        replace_fields(LookupTuning(), "lookup tuning", bogus=1)


def test_options_fold_into_a_given_tuning() -> None:
    base = LookupTuning(context_cap=32)
    opts = with_tuning_options({"tuning": base, "max_draft": 8, "resync": 2}, LookupTuning, "lookup tuning")
    assert opts["max_draft"] == 8
    assert (opts["tuning"].context_cap, opts["tuning"].follower.resync) == (32, 2)
    assert with_tuning_options({"max_draft": 8}, LookupTuning, "x") == {"max_draft": 8}


@pytest.mark.parametrize("method, tuning", METHODS)
def test_no_knob_shadows_a_constructor_argument(method: type, tuning: type) -> None:
    params = set(inspect.signature(method.__init__).parameters) - {"self"}
    assert not params & field_names(tuning)


@pytest.mark.parametrize("spec, attr, value", [
    ("lookup:stats_decay=0.95,min_seen=3", ("stats_decay", "follower.min_seen"), (0.95, 3)),
    ("lookahead:margin=0.1,replan_every=64", ("margin", "replan_every"), (0.1, 64)),
    ("medusa:recheck_every=16", ("recheck_every",), (16,)),
    ("auto:plan_margin=0.05", ("plan_margin",), (0.05,)),
])
def test_a_spec_sets_each_methods_knobs(spec: str, attr: tuple[str, ...], value: tuple[object, ...]) -> None:
    method = make_method(spec)
    got = []
    for path in attr:
        obj: object = method.tuning
        for part in path.split("."):
            obj = getattr(obj, part)
        got.append(obj)
    assert tuple(got) == value


def test_an_unknown_spec_option_still_fails_clearly() -> None:
    with pytest.raises(ValueError, match="lookup"):
        make_method("lookup:no_such_knob=1")
