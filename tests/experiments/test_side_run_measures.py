"""The measures experiments/ computes for the tables of experiments/notes on the closed loop: the tracking
error split against the reference (`control_sensitivity.reference_split`), the identified
actuator's shrinkage (`control_diagnosis.slope_statistics`) and the substitution of one part of a
prediction by the oracle's (`control_diagnosis.blend`), on inputs whose answer is known; and the
plants the side runs judge on (`control_side_runs._held_out_plants`)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from tickformer.control import HiddenPlantSim
from tickformer.control.plant import NOMINAL
from tickformer.control.reference import SineReference

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "experiments"))

from control_diagnosis import HybridMPC, blend, slope_statistics  # noqa: E402
from control_sensitivity import reference_split  # noqa: E402


def test_reference_split_recovers_amplitude_phase_offset_and_adds_up():
    ref = SineReference(0.25, 4.0)
    sim = HiddenPlantSim(NOMINAL, ref, 1000, seed=0)
    sim.k = 1000  # a finished run whose angles are written below
    t = np.arange(1001) * NOMINAL.dt
    rr = np.array([ref(float(x)) for x in t])  # [T + 1, 2]
    noise = 0.002 * np.random.default_rng(0).standard_normal(t.size)
    sim.theta[:] = 0.9 * rr[:, 0] + 0.03 * rr[:, 1] + 0.004 + noise  # a = -0.1, b = 0.03 s, c = 0.004
    s = reference_split(sim, 100)
    # 900 ticks of N(0, 0.002^2) noise: standard errors 0.002 / (sqrt(900) x the column's RMS),
    # about 4e-4 on a (r's RMS 0.18 rad), 2.4e-4 s on b (r''s RMS 0.28 rad/s) and 7e-5 rad on c;
    # the bounds are 4 to 8 of them, and the residual RMS is the noise's own within 10% (its
    # sampling spread over 900 ticks is about 1 / sqrt(1800) = 2.4%)
    assert s["amplitude_coef"] == pytest.approx(-0.1, abs=2e-3)
    assert s["phase_coef_s"] == pytest.approx(0.03, abs=2e-3)
    assert s["offset_rad"] == pytest.approx(0.004, abs=3e-4)
    assert s["residual_rms"] == pytest.approx(0.002, rel=0.1)  # what is left is the noise
    total = sim.tracking(skip=100)["rms_rad"]
    assert np.hypot(s["systematic_rms"], s["residual_rms"]) == pytest.approx(total, rel=1e-12)


def test_slope_statistics_measure_shrinkage_and_skip_wrong_signs():
    gain = np.linspace(1.0, 9.0, 200)
    dt = 0.1
    exact = gain * dt**2 / 2
    s = slope_statistics(exact, gain, dt)  # in proportion: no shrinkage
    assert s["slope_gain_elasticity"] == pytest.approx(1.0)
    assert s["slope_to_first_order_weakest_quarter"] == pytest.approx(1.0)
    assert s["slope_to_first_order_strongest_quarter"] == pytest.approx(1.0)
    shrunk = (
        3.0**0.5 * gain**0.5 * dt**2 / 2
    )  # the square root: half way to one slope for all, on a log scale
    shrunk[0] = -1e-4  # an episode whose slope has the wrong sign is left out of the log fit
    s = slope_statistics(shrunk, gain, dt)
    assert s["slope_gain_elasticity"] == pytest.approx(0.5)
    assert s["slope_fit_episodes"] == 199
    assert s["slope_to_first_order_weakest_quarter"] > 1.0 > s["slope_to_first_order_strongest_quarter"]


def _parts(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A prediction [K, 2]'s common part (theta_{t+d}, the mean of theta_{t+d+1}) and its command
    part (theta_{t+d+1} less that mean)."""
    return np.array([p[0, 0], p[:, 1].mean()]), p[:, 1] - p[:, 1].mean()


def test_blend_replaces_exactly_the_part_it_names():
    rng = np.random.default_rng(3)
    k = 17
    m = np.stack([np.full(k, 0.3), 0.31 + 0.02 * np.linspace(-1, 1, k) + 1e-3 * rng.standard_normal(k)], 1)
    o = np.stack([np.full(k, 0.28), 0.27 + 0.01 * np.linspace(-1, 1, k)], 1)
    got = {}
    for mode in HybridMPC.MODES:
        got[mode] = m.copy()
        blend(mode, got[mode], o)
    common, command = _parts(got["oracle_common"])
    np.testing.assert_allclose(common, _parts(o)[0], atol=1e-15)
    np.testing.assert_allclose(command, _parts(m)[1], atol=1e-15)
    common, command = _parts(got["oracle_command"])
    np.testing.assert_allclose(common, _parts(m)[0], atol=1e-15)
    np.testing.assert_allclose(command, _parts(o)[1], atol=1e-15)
    both = got["oracle_common"].copy()
    blend("oracle_command", both, o)  # the two parts together are the whole prediction
    np.testing.assert_allclose(both, o, atol=1e-15)
    np.testing.assert_allclose(got["oracle_level"][:, 0], o[:, 0])  # the level, the model's increments
    np.testing.assert_allclose(np.diff(got["oracle_level"], axis=1), np.diff(m, axis=1), atol=1e-15)
    np.testing.assert_allclose(got["oracle_increment"][:, 0], m[:, 0])  # the increments, the model's level
    np.testing.assert_allclose(np.diff(got["oracle_increment"], axis=1), np.diff(o, axis=1), atol=1e-15)
    with pytest.raises(ValueError, match="not one of"):
        blend("oracle_everything", m.copy(), o)


def test_fresh_plants_are_other_held_out_plants():
    """`control_side_runs.py`'s `plants` key ([first, n]) judges on plants no choice was made on:
    the default ([the demo's seed, 5]) is exactly the demo's five, [100, 20] shares none of them,
    and every plant has each constant in a held-out band (odd, of model.plant.BANDS)."""
    from control_side_runs import PLANTS, _held_out_plants

    from tickformer.control.demo import DemoConfig, loop_plants
    from tickformer.control.plant import BANDS, PARAM_RANGES

    five = loop_plants(DemoConfig(), PLANTS)
    assert _held_out_plants(DemoConfig().seed, PLANTS) == five
    fresh = _held_out_plants(100, 20)
    assert len(set(fresh)) == 20 and not set(fresh) & set(five)
    for p in fresh:
        for name, (lo, hi) in PARAM_RANGES.items():
            assert int((getattr(p, name) - lo) / ((hi - lo) / BANDS)) % 2 == 1, (name, p)


def test_scheduled_lr_decays_the_last_fraction_to_zero():
    """The side runs' `sched` (["lin" | "cos", f]): the trainer's rate unchanged before the last
    fraction f of the steps, then scaled down to exactly 0 at the last step, half way at the
    middle of the decay (linear and cosine alike); a bad spec is refused."""
    from control_side_runs import _scheduled_lr

    from tickformer.model.optim import noam_lr

    kw = {"d_model": 32, "warmup": 400}
    for kind in ("lin", "cos"):
        lr = _scheduled_lr(10_000, [kind, 0.5])
        for step in (1, 400, 3000, 5000):
            assert lr(step, **kw) == noam_lr(step, **kw)
        assert lr(7500, **kw) == pytest.approx(0.5 * noam_lr(7500, **kw), rel=1e-12)
        assert lr(10_000, **kw) == pytest.approx(0.0, abs=1e-18)
        assert 0 < lr(9000, **kw) < noam_lr(9000, **kw)
    assert _scheduled_lr(10_000, ["cos", 0.5])(6000, **kw) > _scheduled_lr(10_000, ["lin", 0.5])(6000, **kw)
    for bad in (["exp", 0.5], ["lin", 0.0], ["lin", 1.5]):
        with pytest.raises(SystemExit, match="sched is"):
            _scheduled_lr(10_000, bad)


def test_ensemble_identified_needs_identifying_models_and_a_smoothing_in_range():
    """The `identified` key is refused before any training unless the spec trains identifying
    models (cfg d_out = delay + 6) and the smoothing is in (0, 1]: a wrong spec fails in a
    second, not after minutes of training."""
    from control_side_runs import ensemble

    base = {"seeds": [0], "snapshots": [10]}
    for spec in (
        {**base, "identified": 0.02},  # horizons-only models
        {**base, "identified": 0.02, "cfg": {"d_out": 3}},
        {**base, "identified": 0.0, "cfg": {"d_out": 8}},
        {**base, "identified": 1.5, "cfg": {"d_out": 8}},
    ):
        with pytest.raises(SystemExit, match="identified"):
            ensemble("t", spec)
    with pytest.raises(SystemExit, match="long"):  # the long loop is IdentifiedMPC's
        ensemble("t", {**base, "long": 2000})
