"""Natural order of method names and checkpoint parsing."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from analysis_core.design import Design
from analysis_core.methods import checkpoint_of, natural_key, order_methods


def test_checkpoints_sort_by_step_not_alphabetically():
    names = ["e10", "e3", "e1", "e30", "e0"]
    assert order_methods(names) == ["e0", "e1", "e3", "e10", "e30"]
    assert order_methods(["step_1000", "step_500", "step_50"]) == ["step_50", "step_500", "step_1000"]
    assert order_methods(["b", "A", "a", "B"]) == ["A", "a", "B", "b"]  # case-insensitive, then exact: total


@given(st.lists(st.integers(0, 10**6), min_size=1, max_size=30, unique=True), st.sampled_from(["e", "step_", "ckpt"]))
def test_natural_order_equals_numeric_order_whatever_the_input_order(steps, marker):
    names = [f"triplet_{marker}{s}" for s in steps]
    random.Random(len(steps)).shuffle(names)
    assert [checkpoint_of(n).step for n in order_methods(names)] == sorted(steps)


def test_order_option_overrides_and_must_name_every_method_once():
    assert order_methods(["e1", "e2", "e3"], ["e3", "e1", "e2"]) == ["e3", "e1", "e2"]
    for bad in (["e1", "e2"], ["e1", "e2", "e3", "e4"], ["e1", "e1", "e2", "e3"]):
        with pytest.raises(ValueError, match="every method once"):
            order_methods(["e1", "e2", "e3"], bad)


def test_checkpoint_names_and_families():
    assert checkpoint_of("mlp32_e10") == ("mlp32", 10)
    assert checkpoint_of("epoch_3") == ("", 3)
    assert checkpoint_of("run1/step_500") == ("run1", 500)
    assert checkpoint_of("proxyanchor-ep12") == ("proxyanchor", 12)
    for not_ckpt in ("mlp32", "pixels", "pca16", "lda9", "resnet50"):
        assert checkpoint_of(not_ckpt) is None
    curves = Design.from_names(["triplet_e10", "proxyanchor_e3", "triplet_e3", "pixels", "proxyanchor_e1"]).curves()
    assert curves == {"proxyanchor": [("proxyanchor_e1", 1), ("proxyanchor_e3", 3)],
                      "triplet": [("triplet_e3", 3), ("triplet_e10", 10)]}
    assert natural_key("a2") < natural_key("a10")
