"""Controllers of the hidden pendulum (control/delayed.py): the decision rule over K candidates,
the model controller over a shared history (peek/commit, sliding), the reference controllers."""

from __future__ import annotations

import numpy as np
import pytest

from tickformer import runtime
from tickformer.control import (
    DelayedMPC,
    HiddenPlantSim,
    HistoryMPC,
    IdentifiedMPC,
    NominalMPC,
    OracleMPC,
    SineReference,
)
from tickformer.control.plant import draw_hidden
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset

K = 5
NORM = {"x_mean": [0.0, 0.0], "x_std": [1.0, 1.0], "dy_mean": [0.0, 0.0, 0.0], "dy_std": [0.1, 0.1, 0.1]}


@pytest.fixture(scope="module")
def plant():
    return draw_hidden(np.random.default_rng(7), "held_out")


def _tiny_art(tmp_path_factory, d_out, seed):
    """A tiny windowed model of the pendulum-hidden shape (d_in 2), batch K, untrained."""
    config = preset("tiny").replace(d_in=2, d_out=d_out, window=4)
    out = tmp_path_factory.mktemp(f"hidden{d_out}") / "art"
    export_params(config, init_params(config, seed), out, batch=K)
    return out


@pytest.fixture(scope="module")
def hidden_art(tmp_path_factory):
    """The horizons-only shape: d_out 3 (theta_{t+1..t+3})."""
    return _tiny_art(tmp_path_factory, 3, 3)


@pytest.fixture(scope="module")
def identify_art(tmp_path_factory):
    """The identifying shape: d_out 3 horizons + 5 identification outputs."""
    return _tiny_art(tmp_path_factory, 8, 4)


def _identify_norm(plant, std):
    """NORM with identification columns whose value is the plant's true constants + std * output
    (std 0: exactly the true constants, whatever the untrained model outputs)."""
    from tickformer.control.task import HIDDEN_IDENTIFY_OUTPUTS

    return {
        **NORM,
        "dy_mean": NORM["dy_mean"] + [0.0, 0.0] + np.log(plant.coefficients).tolist(),
        "dy_std": NORM["dy_std"] + [std] * 5,
        "identify": list(HIDDEN_IDENTIFY_OUTPUTS),
    }


def _run(controller, sim, ticks):
    for k in range(ticks):
        sim.actuate(controller.step(sim.observe(k)))
    return sim.tracking(skip=50)["rms_rad"]


def _zero(sim, ticks):
    for k in range(ticks):
        sim.observe(k)
        sim.actuate(np.zeros(1))
    return sim.tracking(skip=50)["rms_rad"]


def test_oracle_and_nominal_close_the_loop(plant):
    ref = SineReference(0.25, 4.0)
    zero = _zero(HiddenPlantSim(plant, ref, 600, seed=1), 600)
    sim = HiddenPlantSim(plant, ref, 600, seed=1)
    oracle = _run(OracleMPC(9, sim), sim, 600)
    nominal = _run(NominalMPC(9), HiddenPlantSim(plant, ref, 600, seed=1), 600)
    sim = HiddenPlantSim(plant, ref, 600, seed=1)
    true_state = _run(OracleMPC(9, sim, true_state=True), sim, 600)
    assert true_state < oracle < 0.2 * zero
    assert nominal < 0.7 * zero  # wrong constants: closes the loop, far from the oracle


def test_tracking_of_a_segment_is_the_rms_over_its_ticks(plant):
    """`until` ends the scored ticks (experiments/control_side_runs.py scores segments with it)."""
    ref = SineReference(0.25, 4.0)
    sim = HiddenPlantSim(plant, ref, 300, seed=1)
    _run(OracleMPC(9, sim), sim, 200)
    ticks = np.arange(51, 121)
    err = sim.theta[51:121] - np.array([ref(float(k) * plant.dt)[0] for k in ticks])
    seg = sim.tracking(skip=50, until=120)
    assert seg["plant_ticks"] == 120
    assert seg["rms_rad"] == pytest.approx(float(np.sqrt(np.mean(err**2))), rel=1e-12)
    assert sim.tracking(skip=50, until=None) == sim.tracking(skip=50)  # the default: to the last tick


def test_decision_rule_picks_the_candidate_nearest_the_reference():
    class Fixed(DelayedMPC):  # the decision rule on a hand-written prediction
        def predict(self, obs):
            self.pred[:, 0] = 0.0
            self.pred[:, 1] = self.cand  # candidate c moves theta to c
            return True

    c = Fixed(5, 0.1, w_omega=0.0)
    assert c.step(np.array([0.0, 0.5, 0.0, 0.0, 0.0]))[0] == pytest.approx(0.5)
    assert c.step(np.array([0.0, -0.9, 0.0, 0.0, 0.0]))[0] == pytest.approx(-1.0)


def test_history_mpc_commits_every_tick_and_slides(hidden_art, plant):
    session = runtime.load(hidden_art, backend="ort")
    c = HistoryMPC(session, NORM, plant, None)
    sim = HiddenPlantSim(plant, SineReference(0.25, 4.0), 100, seed=2)
    for k in range(40):  # 10 windows
        u = c.step(sim.observe(k))
        assert np.isfinite(u[0]) and -1.0 <= u[0] <= 1.0
        sim.actuate(u)
        # tick k's token waits for its actuated command: committed at the start of tick k + 1
        assert session.position == k and session.peek_pending
    assert c.replaced == 0  # every actuated command was the chosen candidate: commit(j), no extra step
    k_cache, _ = session.backend.cache()
    for row in range(1, K):
        np.testing.assert_array_equal(k_cache[:, row], k_cache[:, 0])  # one shared history


def test_history_mpc_predicts_from_the_peeked_columns_d_and_d_plus_1(hidden_art, plant):
    """pred [K, 2] is (theta_{t+d}, theta_{t+d+1}) = y + dy_mean[i] + dy_std[i] * out[:, 0, i] at
    i = d - 1, d of the model's output for each candidate's input (z, (c_j - x_mean) / x_std):
    recomputed here, as Python floats, from a second session stepped with that input. The norm's
    entries all differ, so reading another column, another mean or scale, or the wrong input
    column fails."""
    norm = {
        "x_mean": [0.05, 0.1],
        "x_std": [2.0, 0.5],
        "dy_mean": [0.01, 0.02, 0.03],
        "dy_std": [0.1, 0.2, 0.3],
    }
    session, twin = runtime.load(hidden_art, backend="ort"), runtime.load(hidden_art, backend="ort")
    c = HistoryMPC(session, norm, plant, None)
    d = plant.delay
    assert d == 2  # the artifact's d_out is d + 1 = 3
    y = 0.3
    c.step(np.array([y, 0.1, 0.0, 0.0, 0.0]))
    z = (y - 0.05) / 2.0
    x = np.zeros((K, 1, 2), dtype=np.float32)
    x[:, 0, 0] = z
    x[:, 0, 1] = (c.cand - 0.1) / 0.5
    np.testing.assert_array_equal(c.xs, x)  # the peek's input
    out = twin.step(x)  # [K, 1, 3]: position 0, what the peek saw
    for j in range(K):
        for col, i in enumerate((d - 1, d)):
            expected = y + norm["dy_mean"][i] + norm["dy_std"][i] * float(out[j, 0, i])
            assert c.pred[j, col] == expected, (j, col)


def test_history_mpc_refuses_outputs_that_are_not_one_per_horizon(hidden_art, plant):
    """The artifact's output columns, the norm's horizons and the plant's delay must agree (d_out =
    delay + 1), else the controller would read theta_{t+d}, theta_{t+d+1} from the wrong columns
    or fail mid-loop: a clear error at construction instead, naming all three."""
    import dataclasses

    from tickformer.errors import ConfigError

    session = runtime.load(hidden_art, backend="ort")  # d_out 3
    with pytest.raises(ConfigError, match="delay 3"):
        HistoryMPC(session, NORM, dataclasses.replace(plant, delay=3), None)
    four = {**NORM, "dy_mean": [0.0] * 4, "dy_std": [0.1] * 4}
    with pytest.raises(ConfigError, match="norm's 4 columns"):
        HistoryMPC(session, four, plant, None)
    HistoryMPC(session, NORM, plant, None)  # agreeing: accepted


@pytest.mark.parametrize("y_lags, c_lags", [(0, 2), (2, 4)])
def test_history_mpc_lag_columns_are_the_tokens_before(plant, tmp_path, y_lags, c_lags):
    """A model whose token carries earlier measurements and commands (model.tasks
    hidden_features: y_t, c_t, y_{t-1}, .., c_{t-1}, ..): through skipped ticks, a bounded
    catch-up and a fallback, the history the controller commits is the offline features of what
    the plant measured and got, token for token (the caches of a twin session stepped with those
    features are equal, tick after tick)."""
    from tickformer.control.task import hidden_features

    config = preset("tiny").replace(d_in=2 + y_lags + c_lags, d_out=3, window=8)
    art = tmp_path / "art"
    export_params(config, init_params(config, 5), art, batch=K)
    norm = {
        "x_mean": [0.05, 0.1] + [0.05] * y_lags + [0.1] * c_lags,
        "x_std": [2.0, 0.5] + [2.0] * y_lags + [0.5] * c_lags,
        "dy_mean": [0.01, 0.02, 0.03],
        "dy_std": [0.1, 0.2, 0.3],
    }
    if y_lags:
        norm["lags"] = [y_lags, c_lags]
    session, twin = runtime.load(art, backend="ort"), runtime.load(art, backend="ort")
    c = HistoryMPC(session, norm, plant, None, catch_up_max=1)
    assert (c.y_lags, c.c_lags) == (y_lags, c_lags)
    sim = HiddenPlantSim(plant, SineReference(0.25, 4.0), 400, seed=3)
    ys, cmds, pend, k = [], [], None, 0
    for tick in range(60):
        if tick in (12, 30):
            k += 4  # the loop skipped periods: the plant moved under the held command
        obs = sim.observe(k)
        if pend is not None:  # the last tick's token, with the command actually actuated
            ys.append(pend)
            cmds.append(float(obs[3]))
        n = int(obs[4])
        ys += obs[5 : 5 + n].tolist()
        cmds += [float(obs[3])] * n
        u = c.step(obs)
        if tick == 40:
            u = np.full(1, np.nan)  # an unusable action: the plant gets 0, not the chosen candidate
        sim.actuate(u)
        pend, k = float(obs[0]), k + 1
        x = hidden_features(np.array(ys), np.array(cmds), norm)  # [T, d_in]: every token known so far
        while twin.position < session.position:  # the twin steps the tokens committed since
            twin.step(np.repeat(x[twin.position][None, None], K, axis=0))
        for a, b in zip(session.backend.cache(), twin.backend.cache()):  # the window's 8 tokens
            np.testing.assert_array_equal(a, b)
    assert c.skipped == 8 and c.replaced >= 1 and c.deferred >= 1
    assert twin.position == session.position >= 60
    assert len(set(map(tuple, x[:, 2:].tolist()))) > 5  # the lag columns move


def test_history_mpc_falls_back_on_a_bad_prediction_and_keeps_the_history(hidden_art, plant):
    """An output over the declared bound: non-finite action (the loop's fallback); at the next
    tick the token is committed with the command actually actuated (a plain step), so the
    stream goes on with what the plant got."""
    session = runtime.load(hidden_art, backend="ort")
    c = HistoryMPC(session, NORM, plant, 1e-9)  # every output exceeds this bound
    obs = np.array([0.1, 0.2, 0.0, 0.0, 0.0])
    assert np.isnan(c.step(obs)[0])
    assert session.position == 0 and session.peek_pending
    obs[3] = 0.3  # the loop actuated its fallback, 0.3
    obs[0] = 1e6  # and now the angle is outside the declared input domain: no peek this tick
    assert np.isnan(c.step(obs)[0])
    assert session.position == 1 and c.replaced == 1 and not session.peek_pending
    obs[0] = 0.1
    c.step(obs)  # the out-of-domain tick left no token
    assert session.position == 1


def _net_blocks(controller, observations, ticks):
    import gc
    import tracemalloc

    step = controller.step
    plan = [observations[k % len(observations)] for k in range(ticks)]

    def loop():
        for obs in plan:
            step(obs)

    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        loop()  # warm-up under tracing: first-call paths, free lists
        before = tracemalloc.take_snapshot()
        loop()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
        gc.enable()
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "*/onnxruntime/*")]
    diff = after.filter_traces(ignore).compare_to(before.filter_traces(ignore), "traceback")
    return sum(d.count_diff for d in diff)


@pytest.mark.slow  # long closed loops under tracemalloc
def test_controllers_allocate_nothing_net_per_tick(hidden_art, identify_art, plant):
    """2,000 ticks of each controller leave zero net traced blocks (the model's session slides)."""
    rng = np.random.default_rng(9)
    observations = [np.array([rng.uniform(-0.5, 0.5), 0.1, 0.0, 0.0, 0.0]) for _ in range(64)]
    session = runtime.load(hidden_art, backend="ort")
    sim = HiddenPlantSim(plant, SineReference(0.25, 4.0), 10)
    identified = IdentifiedMPC(
        runtime.load(identify_art, backend="ort"), _identify_norm(plant, 0.1), plant, None
    )
    for controller in (HistoryMPC(session, NORM, plant, None), NominalMPC(K), OracleMPC(K, sim), identified):
        assert _net_blocks(controller, observations, 2000) == 0, type(controller).__name__


def test_skipped_ticks_are_taken_into_the_history(hidden_art, plant):
    """A late tick makes the loop skip periods; the plant moves on under the held command and
    its measurements arrive with the next observation. HistoryMPC commits one plain step per
    skipped tick (one token per plant tick), keeping the K rows one history; the filters of the
    reference controllers step through them too."""
    session = runtime.load(hidden_art, backend="ort")
    c = HistoryMPC(session, NORM, plant, None)
    sim = HiddenPlantSim(plant, SineReference(0.25, 4.0), 100, seed=3)
    for k in range(5):
        sim.actuate(c.step(sim.observe(k)))
    obs = sim.observe(9)  # ticks 5..8 skipped
    assert obs[4] == 4 and sim.k == 9
    assert np.all(np.abs(obs[5:9]) > 0) and np.all(obs[9:] == 0)  # four buffered measurements, no more
    c.step(obs)
    assert session.position == 9 == sim.k and c.skipped == 4  # tick 4 committed, 4 skipped; 9 pending
    k_cache, _ = session.backend.cache()
    for row in range(1, K):
        np.testing.assert_array_equal(k_cache[:, row], k_cache[:, 0])
    n = NominalMPC(K, plant)
    n.step(np.array([0.1, 0.0, 0.0, 0.0, 2.0, 0.1, 0.1]))
    assert n.issued[-1] == n.last  # after two skipped ticks under command 0 and its own choice


def test_a_skipped_tick_without_catch_up_breaks_the_history(hidden_art, plant):
    """Mutant: catch_up does nothing; the session then has fewer positions than plant ticks."""
    session = runtime.load(hidden_art, backend="ort")
    c = HistoryMPC(session, NORM, plant, None)
    c.catch_up = lambda obs: None
    sim = HiddenPlantSim(plant, SineReference(0.25, 4.0), 100, seed=3)
    sim.actuate(c.step(sim.observe(0)))
    c.step(sim.observe(5))
    assert session.position != sim.k


def test_bounded_catch_up_spreads_a_stall_over_ticks_with_the_same_history(hidden_art, plant):
    """catch_up_max=2 after 9 skipped ticks: at most 3 steps per tick (2 plain steps, and a
    third -- plain, or the peek if the queue is then empty), no prediction (the loop's hold fallback) until the
    queue is empty, each tick's own token queued behind the older ones; then the session holds
    the same tokens in the same order as an uncapped controller fed the same stream (equal
    caches up to the float32 rounding of an actuated command)."""
    capped_s, free_s = runtime.load(hidden_art, backend="ort"), runtime.load(hidden_art, backend="ort")
    capped = HistoryMPC(capped_s, NORM, plant, None, catch_up_max=2)
    free = HistoryMPC(free_s, NORM, plant, None)
    sim = HiddenPlantSim(plant, SineReference(0.25, 4.0), 200, seed=3)
    held = np.zeros(1, dtype=np.float32)
    calls = [0]
    for name in ("step", "peek"):
        real = getattr(capped_s, name)
        setattr(capped_s, name, lambda x, real=real: (calls.__setitem__(0, calls[0] + 1), real(x))[1])

    def tick(k):
        obs = sim.observe(k)
        calls[0] = 0
        u = capped.step(obs)
        assert calls[0] <= 3, (k, calls[0])  # catch_up_max + 1 graph runs at most
        free.step(obs)
        if np.isfinite(u[0]):
            held[0] = u[0]
        sim.actuate(held)  # the loop's hold fallback on a non-finite action
        return bool(np.isfinite(u[0]))

    for k in range(5):
        assert tick(k)
    assert not tick(14)  # ticks 5..13 skipped: 9 queued, 3 stepped
    assert capped_s.position == 5 + 3 and free_s.position == 14 and capped.deferred == 1
    assert not tick(15) and not tick(16)  # 6 + 1 - 3 = 4, then 4 + 1 - 3 = 2 left
    assert not tick(17)  # 2 + 1 - 2 = 1 left: one more would let it peek, a fourth step
    assert tick(18)  # 1 + 1 - 2 = 0: it predicts
    assert capped_s.position == free_s.position == 18 and capped.deferred == 4  # tick 18 pending
    assert capped.dropped == 0
    for a, b in zip(capped_s.backend.cache(), free_s.backend.cache()):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)
    with pytest.raises(Exception, match="catch_up_max"):
        HistoryMPC(free_s, NORM, plant, None, catch_up_max=0)


def test_a_full_catch_up_queue_drops_its_oldest_tokens(hidden_art, plant):
    session = runtime.load(hidden_art, backend="ort")
    c = HistoryMPC(session, NORM, plant, None, catch_up_max=1)
    for i in range(c.QUEUE + 5):
        c._push(float(i), 0.0)
    assert c.dropped == 5 and c._size == c.QUEUE
    assert c._qz[c._head] == 5.0  # the oldest left


def test_catch_up_of_one_per_tick_still_drains(hidden_art, plant):
    """m = 1: each deferred tick adds its own token and steps two (its share and the peek's),
    so a 9-token backlog is gone after 8 deferred ticks (without the peek's share it never drains)."""
    session = runtime.load(hidden_art, backend="ort")
    c = HistoryMPC(session, NORM, plant, None, catch_up_max=1)
    sim = HiddenPlantSim(plant, SineReference(0.25, 4.0), 200, seed=3)
    held = np.zeros(1, dtype=np.float32)
    sim.actuate(c.step(sim.observe(0)))
    k, ok = 10, []  # ticks 1..9 skipped
    for k in range(10, 22):
        u = c.step(sim.observe(k))
        ok.append(bool(np.isfinite(u[0])))
        held[0] = u[0] if ok[-1] else held[0]
        sim.actuate(held)
    assert ok.index(True) == 8 and all(ok[8:])  # ticks 10..17 deferred (net -1 each), 18 on predict
    assert session.position == sim.k - 1


def _lockstep(a, b, plant, ticks, jump_at):
    """Two controllers on two copies of the same plant and noise, the same ticks (one jump of 3
    skipped ticks at `jump_at`); their actions tick by tick."""
    sims = [HiddenPlantSim(plant, SineReference(0.25, 4.0), ticks + 10, seed=5) for _ in range(2)]
    acts = []
    k = 0
    while k < ticks:
        row = []
        for c, sim in zip((a, b), sims):
            u = c.step(sim.observe(k)).copy()
            sim.actuate(u)
            row.append(float(u[0]))
        acts.append(row)
        k += 4 if k == jump_at else 1
    return np.array(acts), sims


@pytest.mark.parametrize("sensor", [{}, {"noise": 0.05, "substeps": 2}])
def test_identified_mpc_with_the_true_constants_is_the_oracle(identify_art, plant, sensor):
    """An identifying model whose constants come out exactly right (std 0: the norm's mean is
    the plant's log constants) makes IdentifiedMPC the oracle controller: its filter and its
    prediction with the true constants, the plant's measurement noise and integration, the
    commands in flight from its own record, the skipped ticks filtered through. Same actions,
    tick for tick, through a jump of skipped ticks; also on a plant whose noise and substeps are
    not the nominal ones."""
    import dataclasses

    plant = dataclasses.replace(plant, **sensor)
    sim = HiddenPlantSim(plant, SineReference(0.25, 4.0), 10)
    oracle = OracleMPC(K, sim)
    ident = IdentifiedMPC(runtime.load(identify_art, backend="ort"), _identify_norm(plant, 0.0), plant, None)
    acts, sims = _lockstep(oracle, ident, plant, 200, jump_at=60)
    np.testing.assert_array_equal(acts[:, 0], acts[:, 1])
    # exp(log k) is k to a few ulps, so the two predictions agree to ~1e-16 rad, not bit for bit
    np.testing.assert_allclose(ident.pred, oracle.pred, rtol=0, atol=1e-12)
    # one token per plant tick (the last tick's awaits its actuated command)
    assert ident.identified == len(acts) and ident.session.position == sims[1].k - 1
    assert sims[0].tracking(skip=50)["rms_rad"] < 0.1


def test_identified_mpc_smooths_the_candidates_mean_of_the_constants_columns(identify_art, plant):
    """With outputs that vary (std 0.2), the constants it uses are the exponential moving average
    (weight `smoothing` on the newest, the first taken whole) of the candidates' mean of the three
    constants columns, read back here from the controller's own decoded outputs tick by tick."""
    from tickformer.control.task import HIDDEN_IDENTIFY_OUTPUTS

    norm = _identify_norm(plant, 0.2)
    c = IdentifiedMPC(runtime.load(identify_art, backend="ort"), norm, plant, None, smoothing=0.3)
    sim = HiddenPlantSim(plant, SineReference(0.25, 4.0), 100, seed=2)
    first = 3 + HIDDEN_IDENTIFY_OUTPUTS.index("log g/L")
    want, seen = None, []
    for k in range(40):
        obs = sim.observe(k)
        sim.actuate(c.step(obs))
        v = c._full[:, 0, first : first + 3].mean(axis=0) - obs[0]  # [3] this tick's estimate
        seen.append(v)
        want = v if want is None else want + 0.3 * (v - want)
        # numpy's mean and the controller's sum / K round differently (~1e-16 per tick, 40 ticks)
        np.testing.assert_allclose(c.log_coef, want, rtol=0, atol=1e-9)
        np.testing.assert_allclose((c.f.a, c.f.b, c.f.c), np.exp(want), rtol=1e-12)
    assert np.ptp(np.array(seen), axis=0).min() > 1e-3  # the estimates did vary


def test_identified_mpc_refuses_what_it_cannot_use(hidden_art, identify_art, plant):
    from tickformer.errors import ConfigError

    with pytest.raises(ConfigError, match="needs an identifying model"):
        IdentifiedMPC(runtime.load(hidden_art, backend="ort"), NORM, plant, None)
    for bad in (0.0, 1.5):
        with pytest.raises(ConfigError, match="smoothing"):
            IdentifiedMPC(
                runtime.load(identify_art, backend="ort"),
                _identify_norm(plant, 0.1),
                plant,
                None,
                smoothing=bad,
            )


def test_identified_mpc_filters_every_angle_even_without_a_usable_output(identify_art, plant):
    """Every model output over its bound (a tiny output bound): no tick has a usable prediction,
    so every action is the loop's fallback (NaN) and no constant is ever identified; the filter
    still takes in every measured angle, with the commands actuated: its state is that of a
    filter with the nominal constants fed the same stream."""
    import dataclasses

    from tickformer.control.estimation import HiddenEKF
    from tickformer.control.plant import NOMINAL

    c = IdentifiedMPC(runtime.load(identify_art, backend="ort"), _identify_norm(plant, 0.1), plant, 1e-9)
    twin = HiddenEKF(
        dataclasses.replace(
            plant, mass=NOMINAL.mass, length=NOMINAL.length, damping=NOMINAL.damping, gain=NOMINAL.gain
        )
    )
    sim = HiddenPlantSim(plant, SineReference(0.25, 4.0), 100, seed=4)
    applied = [0.0] * (plant.delay + 1)  # the commands actuated at t-d-1..t-1
    for k in range(30):
        obs = sim.observe(k)
        applied = applied[1:] + [float(obs[3])] if k else applied
        state = twin.update(float(obs[0]), applied[0])
        u = c.step(obs)
        assert np.isnan(u[0])
        sim.actuate(np.zeros(1))  # the loop's fallback: hold (here 0)
        assert (c.ekf.x0, c.ekf.x1) == state  # the same constants, the same float operations
    assert c.identified == 0 and c.log_coef == [0.0, 0.0, 0.0]
