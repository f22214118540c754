"""Tuning knobs from a method spec: `lookup:stats_decay=0.95` sets a field of the method's
tuning dataclass (nested ones included), unknown names fail clearly, and no knob shadows
a constructor argument."""

from __future__ import annotations

import inspect
import re
from dataclasses import fields

import pytest

from pyaccel.methods import make_method
from pyaccel.methods.auto.proposer import Auto, AutoTuning
from pyaccel.methods.lookahead import Lookahead
from pyaccel.methods.lookahead.sizing import LookaheadTuning
from pyaccel.methods.lookup import LookupTuning, PromptLookup
from pyaccel.methods.auto.calibration import CalibrationTuning
from pyaccel.methods.medusa import Medusa
from pyaccel.methods.medusa.proposer import MedusaTuning
from pyaccel.methods.tuning import field_names, replace_fields, scalar_fields, with_tuning_options

METHODS = [(PromptLookup, LookupTuning), (Lookahead, LookaheadTuning), (Medusa, MedusaTuning), (Auto, AutoTuning)]


def test_replace_fields_reaches_nested_tuning() -> None:
    tuned = replace_fields(AutoTuning(), "auto tuning", plan_margin=0.2, stats_decay=0.9, decay=0.9)
    assert tuned.plan_margin == 0.2 and tuned.prompt_lookup.stats_decay == 0.9
    assert tuned.calibration == CalibrationTuning(decay=0.9)
    assert tuned.prompt_lookup.min_seen == LookupTuning().min_seen
    assert LookupTuning().stats_decay == 0.98  # the original is untouched


def test_field_names_cover_nested_fields() -> None:
    names = field_names(AutoTuning)
    assert {f.name for f in fields(LookupTuning)} <= names
    assert {f.name for f in fields(CalibrationTuning)} <= names


def test_unknown_knob_names_the_choices() -> None:
    with pytest.raises(ValueError, match=r"unknown lookup tuning bogus: choose from .*stats_decay"):
        replace_fields(LookupTuning(), "lookup tuning", bogus=1)


def test_nested_knobs_apply_on_top_of_a_nested_tuning_given_whole() -> None:
    tuned = replace_fields(AutoTuning(), "auto tuning", prompt_lookup=LookupTuning(stats_decay=0.9), min_seen=5)
    assert tuned.prompt_lookup == LookupTuning(stats_decay=0.9, min_seen=5)


def test_options_fold_into_a_given_tuning() -> None:
    base = LookupTuning(stats_decay=0.9)
    opts = with_tuning_options({"tuning": base, "max_draft": 8, "min_seen": 3}, PromptLookup, LookupTuning, "lookup")
    assert opts["max_draft"] == 8
    assert (opts["tuning"].stats_decay, opts["tuning"].min_seen) == (0.9, 3)
    assert with_tuning_options({"max_draft": 8}, PromptLookup, LookupTuning, "lookup") == {"max_draft": 8}


def test_only_scalar_knobs_are_spec_options() -> None:
    knobs = scalar_fields(LookupTuning)
    assert {"stats_decay", "stats_prior_weight", "keep_copy_stats", "min_seen"} <= set(knobs)
    assert not {"prior_fresh", "follower"} & set(knobs)  # a tuple, a dataclass
    assert "tau" not in scalar_fields(LookaheadTuning)  # a table


@pytest.mark.parametrize("method, tuning", METHODS)
def test_no_knob_shadows_a_constructor_argument(method: type, tuning: type) -> None:
    params = set(inspect.signature(method.__init__).parameters) - {"self"}
    assert not params & field_names(tuning)


@pytest.mark.parametrize("spec, attr, value", [
    ("lookup:stats_decay=0.95,min_seen=3", ("stats_decay", "min_seen"), (0.95, 3)),
    ("lookahead:margin=0.1,replan_every=64", ("margin", "replan_every"), (0.1, 64)),
    ("medusa:recheck_every=16", ("recheck_every",), (16,)),
    ("auto:plan_margin=0.05", ("plan_margin",), (0.05,)),
    ("draft:probe_every=8,min_prob=0.5", ("probe_every", "min_prob"), (8, 0.5)),
    ("auto:keep_copy_stats=false,min_seen=3", ("prompt_lookup.keep_copy_stats", "prompt_lookup.min_seen"),
     (False, 3)),
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


@pytest.mark.parametrize("spec", ["lookup:no_such_knob=1", "lookup:prior_fresh=0.3", "lookup:follower=3",
                                  "lookahead:tau=1.4"])
def test_an_unknown_spec_option_lists_arguments_and_knobs(spec: str) -> None:
    with pytest.raises(ValueError, match=r"method '\w+': unknown option .*; its arguments are .*max_draft|"
                                         r"its tuning knobs are .*margin"):
        make_method(spec)


@pytest.mark.parametrize("spec, message", [
    ("lookup:min_seen=1.5", "min_seen must be an integer"),
    ("lookup:keep_copy_stats=1", "keep_copy_stats must be true or false"),
    ("auto:plan_margin=true", "plan_margin must be a number"),
])
def test_a_knob_of_the_wrong_type_fails(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_method(spec)


@pytest.mark.parametrize("spec, message", [
    ("lookup:max_draft=abc", "method 'lookup': max_draft must be an integer, got 'abc'"),
    ("lookup:max_draft=true", "max_draft must be an integer, got True"),
    ("draft:length=abc", "method 'draft': length must be an integer or none"),
    ("draft:min_prob=high", "min_prob must be a number"),
    ("ngram:max_draft=x", "method 'ngram': max_draft must be an integer"),
    ("lookahead:window=2.5", "window must be an integer or none, got 2.5"),
    ("medusa:tree=3", "tree must be a string"),
    ("auto:lookahead=1", "lookahead must be true or false"),
])
def test_a_constructor_argument_of_the_wrong_type_fails(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        make_method(spec)


def test_a_spec_option_given_twice_fails() -> None:
    with pytest.raises(ValueError, match="'max_draft' is given twice"):
        make_method("lookup:max_draft=32,max_draft=4")


def test_right_types_and_none_pass_the_argument_check() -> None:
    assert make_method("lookup:max_draft=8,length=none").max_draft == 8
    assert make_method("draft:min_prob=1,length=3").tuning.min_prob == 1  # an int is a number


@pytest.mark.parametrize("spec, name", [
    ("lookup:stats_decay=1.5", "stats_decay"), ("lookup:stats_prior_weight=0", "stats_prior_weight"),
    ("lookup:min_seen=0", "min_seen"), ("lookahead:replan_every=0", "replan_every"),
    ("lookahead:margin=-0.1", "margin"), ("medusa:recheck_every=0", "recheck_every"),
])
def test_a_knob_out_of_range_fails_at_construction(spec: str, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        make_method(spec)


def test_an_int_sets_a_float_knob() -> None:
    assert make_method("auto:plan_margin=0").tuning.plan_margin == 0


@pytest.mark.parametrize("spec, message", [
    ("auto:tuning=1", "tuning takes a Python object (AutoTuning)"),
    ("auto:costs=1", "costs takes a Python object (CostModel)"),
    ("lookup:costs=x", "costs takes a Python object"),
    ("auto:extra=1", "extra takes a Python object"),
    ("medusa:tuning=1", "tuning takes a Python object (MedusaTuning)"),
    ("ngram:thresholds=2", "thresholds takes a Python object (_core.NgramDraftThresholds)"),
    ("ngram:static_path=1", "static_path must be a path or none, got 1"),
    ("draft:draft=1", "draft must be a registry name, a .gguf path or a pyaccel.Model, got 1"),
    ("lookup:length=-3", "length must be in 0..max_draft"),
])
def test_an_option_a_spec_cannot_write_fails_at_once(spec: str, message: str) -> None:
    """Not a warning at the first step and a plain decode: a clear error before any model."""
    with pytest.raises(ValueError, match=re.escape(message)):
        make_method(spec)
