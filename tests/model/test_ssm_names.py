"""The SSM block's parameter names (model/names.py, new functions only): the scheme, its shapes,
and that it cannot collide with the names that exist (those are pinned by test_names.py)."""

from __future__ import annotations

import numpy as np

from tickformer.model import names, ssm


def test_the_ssm_scheme():
    group = names.ssm_group(2)
    assert group.prefix == "dec.2.ssm"
    assert group.names() == tuple(f"dec.2.ssm.{leaf}" for leaf in names.SSM_NAMES)
    assert [g.prefix for g in names.ssm_layer_groups(1)] == [
        "dec.1.ssm",
        "dec.1.ln1",
        "dec.1.ffn",
        "dec.1.ln2",
    ]
    assert names.ssm_layer_groups(0)[2].leaves == names.FFN_NAMES


def test_no_collision_with_the_existing_names():
    shared = set(names.SSM_NAMES) & set(names.ATTN_NAMES + names.FFN_NAMES + names.NORM_NAMES)
    assert shared == {"w_o", "b_o"}  # the output projection, the same role in both mixers
    attention_layer = {n for g in names.decoder_layer(0, cross=False).groups() for n in g.names()}
    ssm_layer = {n for g in names.ssm_layer_groups(0) for n in g.names()}
    assert ssm_layer - attention_layer == set(names.ssm_group(0).names())  # only the mixer is new


def test_shapes_and_init_follow_the_names():
    d, n = 5, 3
    shapes = ssm.ssm_shapes(d, n)
    assert tuple(shapes) == names.SSM_NAMES
    params = ssm.ssm_init(d, n, np.random.default_rng(0))
    assert {k: v.shape for k, v in params.items()} == shapes
    assert all(v.dtype == np.float32 for v in params.values())
    np.testing.assert_array_equal(
        params["a_log"], np.log(np.arange(1, n + 1, dtype=np.float32))[None].repeat(d, 0)
    )
    dt = ssm.softplus(params["b_delta"].astype(np.float64))  # Mamba: initial steps in [1e-3, 1e-1]
    assert np.all((dt >= ssm.DT_MIN * (1 - 1e-5)) & (dt <= ssm.DT_MAX * (1 + 1e-5)))
    np.testing.assert_array_equal(params["d_skip"], 1.0)
    assert all(v.flags["C_CONTIGUOUS"] for v in params.values())  # a broadcast copy is not, by default
