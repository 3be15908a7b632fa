"""Activation tables: slopes are derivatives, Lipschitz constants bound them, r(z, w) is exact."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from warp_check.model.activations import ACTIVATIONS, get_activation, torch_activation

GRID = np.linspace(-8, 8, 20001)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_slope_is_the_derivative_and_lipschitz_bounds_it(name):
    act = ACTIVATIONS[name]
    x = GRID[np.abs(GRID) > 1e-3]  # away from ReLU's kink
    numeric = (act.fn(x + 1e-6) - act.fn(x - 1e-6)) / 2e-6
    np.testing.assert_allclose(act.slope(x), numeric, atol=1e-6)
    assert np.max(np.abs(act.slope(GRID))) <= act.lipschitz
    assert np.max(np.abs(act.slope(GRID))) >= act.lipschitz - 1e-3  # and is not loose


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_numpy_and_torch_activations_agree(name):
    act = ACTIVATIONS[name]
    x = np.linspace(-6, 6, 101)
    torch_values = torch_activation(act.torch_name)(torch.tensor(x, dtype=torch.float64)).numpy()
    np.testing.assert_allclose(act.fn(x), torch_values, atol=1e-12)


@settings(max_examples=200, deadline=None)
@given(name=st.sampled_from(sorted(ACTIVATIONS)), z=st.floats(-6, 6), w=st.floats(0, 4))
def test_slope_change_bound_is_the_sup_over_the_interval(name, z, w):
    act = ACTIVATIONS[name]
    bound = float(act.slope_change_bound(np.array([z]), np.array([w]))[0])
    u = np.linspace(z - w, z + w, 4001)
    brute = float(np.max(np.abs(act.slope(u) - act.slope(np.float64(z)))))
    assert bound >= brute - 1e-9  # sound
    if name != "relu":
        assert bound <= brute + 1e-3  # and tight (the grid can miss a hair of the extreme)


def test_aliases_from_transformers_names():
    assert get_activation("gelu_new").name == "gelu_tanh"
    assert get_activation("GELUActivation").name == "gelu"
    with pytest.raises(KeyError, match="not supported"):
        get_activation("softsign")


def test_every_activation_is_known_by_its_own_name():
    from warp_check.model.activation_names import KNOWN, canonical_name

    assert set(KNOWN) == set(ACTIVATIONS)
    for name in ACTIVATIONS:
        assert canonical_name(name) == name and canonical_name(name.upper()) == name
