"""The demo's library code (control/demo.py): the loop statistics, the verdict, the plots."""

from __future__ import annotations

import numpy as np
import pytest

from tickformer.control import NominalMPC
from tickformer.control import demo as D
from tickformer.control import demo_plots as P
from tickformer.control.delayed import HiddenPlantSim


def test_p50_drift_uses_the_first_and_last_tenth_and_the_stated_tolerance():
    flat = np.full(1000, 500_000.0)  # 500 us every tick
    d = D.p50_drift(flat)
    assert d["step_p50_first_10pct_us"] == d["step_p50_last_10pct_us"] == 500.0
    assert d["step_p50_change"] == 0.0 and d["step_p50_within_tolerance"]
    assert len(d["step_p50_per_tenth_us"]) == 10
    grown = flat.copy()
    grown[-100:] *= 1.0 + 1.5 * D.P50_DRIFT_TOLERANCE  # only the last tenth is slower
    d = D.p50_drift(grown)
    assert d["step_p50_change"] == pytest.approx(1.5 * D.P50_DRIFT_TOLERANCE)
    assert not d["step_p50_within_tolerance"]
    grown[-101] *= 3.0  # one tick outside the last tenth changes nothing
    assert D.p50_drift(grown)["step_p50_change"] == pytest.approx(1.5 * D.P50_DRIFT_TOLERANCE)


def _loop(model_rms=0.012, oracle_rms=0.01, misses=1, covered=1, ticks=20_000, rss=(100, 100), change=0.0):
    row = {"ticks": ticks, "deadline_misses": 0, "misses_covered_by_fallback": 0, "tracking_rms": 0.05}
    loop = {name: {**row, "virtual_time": {"tracking_rms": 0.05}} for name in D.CONTROLLERS}
    loop["model"]["virtual_time"]["tracking_rms"] = model_rms
    loop["oracle"]["virtual_time"]["tracking_rms"] = oracle_rms
    loop["model"].update(
        tracking_rms=0.5,  # the wall-clock run's tracking: reported, never the verdict's
        deadline_misses=misses,
        misses_covered_by_fallback=covered,
        rss_warm_bytes=rss[0],
        rss_end_bytes=rss[1],
        step_p50_change=change,
        step_p50_within_tolerance=abs(change) <= D.P50_DRIFT_TOLERANCE,
    )
    return loop


def test_loop_verdict_checks_each_target():
    ok = D.loop_verdict(_loop())
    assert all(v["met"] for v in ok.values()), ok
    assert ok["tracking"]["model_to_oracle"] == pytest.approx(1.2)  # virtual time
    assert ok["tracking"]["model_to_oracle_real_time"] == pytest.approx(10.0)  # 0.5 / 0.05, reported
    assert not D.loop_verdict(_loop(model_rms=0.016))["tracking"]["met"]  # 1.6 x oracle
    assert not D.loop_verdict(_loop(model_rms=0.06, oracle_rms=0.05))["tracking"]["met"]  # above memoryless
    assert not D.loop_verdict(_loop(misses=3, covered=3))["deadlines"]["met"]  # 1.5 in 10^4
    assert not D.loop_verdict(_loop(misses=2, covered=1))["deadlines"]["met"]  # one not covered
    assert D.loop_verdict(_loop(misses=2, covered=2))["deadlines"]["met"]  # exactly 1 in 10^4
    assert not D.loop_verdict(_loop(rss=(100, 4196)))["rss"]["met"]
    assert not D.loop_verdict(_loop(change=-0.2))["step_p50_first_last"]["met"]


class _Iso:
    def __init__(self):
        self.granted = {"sched_fifo": {"requested": True, "granted": False, "detail": "test"}}
        self.entered = self.exited = 0

    def __enter__(self):
        self.entered += 1
        return self

    def __exit__(self, *exc):
        self.exited += 1


def test_run_loop_records_isolation_rss_after_warm_up_and_drift():
    cfg = D.DemoConfig(quick=True, ticks=160, period_ms=0.5, settle_ticks=40)
    plant = D.loop_plant(cfg)
    sim = HiddenPlantSim(plant, D.reference(cfg), cfg.ticks * 64, seed=0)
    iso = _Iso()
    r = D.run_loop(NominalMPC(cfg.candidates), sim, cfg, isolation=lambda: iso)
    assert iso.entered == iso.exited == 1 and r["isolation"] == iso.granted
    assert r["ticks"] == 160 and r["rss_warm_tick"] == 40
    assert r["rss_warm_bytes"] > 0 and r["rss_end_bytes"] > 0
    assert r["misses_covered_by_fallback"] == r["deadline_misses"]  # late outputs go to the fallback
    assert r["late_outputs"] == r["deadlines"]["late_outputs"]
    assert {"step_p50_first_10pct_us", "step_p50_change", "step_p50_per_tenth_us"} <= set(r)
    assert r["_step_ns"].shape == (160,)


class _StallingClock:
    """A wall clock on which every call to the step costs `step_ns` and one tick in 7 stalls for
    3 periods: what a loaded machine does to the loop."""

    def __init__(self, period_ns: int) -> None:
        self.now_ns, self.period_ns, self.calls = 0, period_ns, 0

    def clock(self) -> int:
        self.calls += 1
        self.now_ns += self.period_ns // 10 + (3 * self.period_ns if self.calls % 29 == 0 else 0)
        return self.now_ns

    def sleep(self, ns: int) -> None:
        self.now_ns += max(0, ns)


def test_virtual_time_tracking_is_the_same_on_any_clock_and_load():
    """The virtual-time run is bit-identical run to run, and the same loop on a stalling clock
    (late ticks, skipped periods, fallbacks) tracks differently: the virtual clock is what makes
    the quality number independent of the machine (a mutant run_virtual on the wall clock fails
    the equality below under load, and the stalling run shows the difference it would make)."""
    from tickformer.runtime.control_loop import ControlLoop

    cfg = D.DemoConfig(quick=True, ticks=300, period_ms=1.0)
    plant = D.loop_plant(cfg)

    def fresh():
        sim = HiddenPlantSim(plant, D.reference(cfg), cfg.ticks * 64, seed=0)
        return NominalMPC(cfg.candidates), sim

    a = D.run_virtual(*fresh(), cfg)
    b = D.run_virtual(*fresh(), cfg)
    assert a["tracking_rms"] == b["tracking_rms"] and np.array_equal(a["_theta"], b["_theta"])
    assert a["ticks"] == cfg.ticks and a["fallbacks"] == 0
    assert a["_theta"].size == cfg.ticks + 1  # no skipped period: one plant tick per loop tick
    ctl, sim = fresh()
    stall = _StallingClock(cfg.period_ns)
    stats = ControlLoop(ctl, D.loop_config(cfg), clock=stall.clock, sleep=stall.sleep).run(
        cfg.ticks, sim.observe, sim.actuate
    )
    assert stats.skipped_periods > 0 and stats.fallbacks > 0
    assert sim.tracking(skip=min(cfg.settle_ticks, cfg.ticks // 4))["rms_rad"] != a["tracking_rms"]


def test_virtual_clock_moves_only_when_the_loop_sleeps():
    from tickformer.runtime.control_loop import VirtualClock

    vc = VirtualClock(5)
    assert vc.now() == vc.now() == 5
    vc.sleep(-3)
    vc.sleep(0)
    assert vc.now() == 5
    vc.sleep(10)
    assert vc.now() == 15


def test_plots_are_written_atomically(tmp_path, monkeypatch):
    """A figure that fails half-way leaves the previous file whole (the bytes are rendered in
    memory and written with one atomic replace); a good one replaces it."""
    import matplotlib.figure

    cfg = D.DemoConfig(quick=True, ticks=200)
    n = 200
    row = {
        "_theta": np.zeros(n + 1),
        "tracking_rms": 0.01,
        "ticks": n,
        "_step_ns": np.full(n, 3e5),
        "_late_ticks": np.array([5]),
    }
    loop = {"dt_s": 0.1, **{name: {**row, "virtual_time": dict(row)} for name in D.CONTROLLERS}}
    for plot, name in ((P.plot_tracking, "tracking.png"), (P.plot_latency, "latency.png")):
        path = tmp_path / name
        path.write_bytes(b"old")
        real = matplotlib.figure.Figure.savefig

        def broken(self, fname, *a, **k):
            if hasattr(fname, "write"):
                fname.write(b"\x89PNG half")
            else:
                with open(fname, "wb") as f:
                    f.write(b"\x89PNG half")
            raise OSError("disk full")

        monkeypatch.setattr(matplotlib.figure.Figure, "savefig", broken)
        with pytest.raises(OSError, match="disk full"):
            plot(path, loop, cfg)
        assert path.read_bytes() == b"old"
        monkeypatch.setattr(matplotlib.figure.Figure, "savefig", real)
        plot(path, loop, cfg)
        assert path.read_bytes()[:4] == b"\x89PNG" and path.stat().st_size < 200_000
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_public_drops_the_per_tick_arrays():
    loop = {
        "period_ms": 2.0,
        "model": {"ticks": 3, "_step_ns": np.zeros(3), "virtual_time": {"ticks": 3, "_theta": np.zeros(4)}},
    }
    assert D.public(loop) == {"period_ms": 2.0, "model": {"ticks": 3, "virtual_time": {"ticks": 3}}}


def test_period_shares():
    loop = {"period_ms": 2.0, "budget_ms": 1.0, "model": {"step_p50_us": 500.0, "step_p99_us": 1000.0}}
    cert = {"p50_us": 200.0, "p99_us": 300.0, "max_us": 2000.0}
    s = D.period_shares(cert, loop, D.DemoConfig(catch_up_max=2))
    assert s["certified_step_p50_share"] == pytest.approx(0.1) and s["certified_step_max_share"] == 1.0
    assert s["model_tick_p50_share"] == 0.25 and s["model_tick_p99_share"] == 0.5
    assert s["rule_need_us"] == 900.0 and s["rule_met"]  # 3 runs x 300 us <= 1000 us
    assert not D.period_shares(cert, loop, D.DemoConfig(catch_up_max=3))["rule_met"]


def test_tracking_plot_takes_traces_of_different_lengths(tmp_path):
    """Skipped periods advance the plant, so loops of the same tick count end at different plant
    times (CI: the model's trace 123 samples, the memoryless one's 121): each is plotted against
    its own plant time, the shorter first or last alike."""
    cfg = D.DemoConfig(quick=True, ticks=120)
    lengths = dict(zip(D.CONTROLLERS, (121, 123, 119, 122)))
    loop = {"dt_s": 0.1}
    for name, n in lengths.items():
        virtual = {"_theta": np.linspace(0.0, 0.1, n), "tracking_rms": 0.01}
        loop[name] = {"virtual_time": virtual, "tracking_rms": 0.01, "ticks": 120}
    P.plot_tracking(tmp_path / "tracking.png", loop, cfg)
    assert (tmp_path / "tracking.png").read_bytes()[:4] == b"\x89PNG"


def test_closed_loop_training_episodes_use_the_demo_controllers_rule():
    """control.plant's closed-loop training episodes are drawn with the demo's decision rule (its
    candidates, kp and w_omega): DemoConfig's defaults are those constants, and the controllers
    take them as they are (a changed default fails this)."""
    from tickformer.control.plant import LOOP_CANDIDATES, LOOP_KP, LOOP_W_OMEGA

    cfg = D.DemoConfig()
    assert (LOOP_CANDIDATES, LOOP_KP, LOOP_W_OMEGA) == (cfg.candidates, cfg.kp, cfg.w_omega)
    ctl = NominalMPC(cfg.candidates, kp=cfg.kp, w_omega=cfg.w_omega)
    assert (len(ctl.cand), ctl.kp, ctl.w) == (LOOP_CANDIDATES, LOOP_KP, LOOP_W_OMEGA)


# ----------------------------------------------------------------------------- backend and tick (issue 40)


def test_choose_backend_takes_c_where_a_compiler_is_and_ort_without(monkeypatch):
    """auto: c where find_compiler finds a compiler (its version in the reason), ort where it
    raises BackendUnavailable; --backend c without a compiler is refused with what to do;
    --backend ort never asks for a compiler. The choice is recorded with its reason."""
    from tickformer.codegen import toolchain
    from tickformer.control import demo_tick as T
    from tickformer.errors import BackendUnavailable, ConfigError

    asked = []

    def found():
        asked.append(1)
        return toolchain.Compiler(path="/opt/bin/gcc", version="gcc (Test) 12.2.0", kind="gcc")

    def none():
        asked.append(1)
        raise BackendUnavailable("backend 'c' needs a C compiler and found none (tried cc)")

    monkeypatch.setattr(toolchain, "find_compiler", found)
    c = T.choose_backend("auto")
    assert (c.requested, c.used, c.compiler) == ("auto", "c", "gcc (Test) 12.2.0")
    assert c.reason.startswith("c (gcc (Test) 12.2.0 found at /opt/bin/gcc")
    assert T.choose_backend("c").used == "c"
    monkeypatch.setattr(toolchain, "find_compiler", none)
    o = T.choose_backend("auto")
    assert (o.used, o.compiler) == ("ort", None) and o.reason.startswith("ort (no C compiler")
    assert o.to_dict() == {"requested": "auto", "used": "ort", "reason": o.reason, "compiler": None}
    with pytest.raises(ConfigError, match="--backend c: .*--backend auto"):
        T.choose_backend("c")
    del asked[:]
    assert T.choose_backend("ort").used == "ort" and asked == []  # no compiler looked for
    with pytest.raises(ConfigError, match="--backend 'cuda' is not one of auto, c, ort"):
        T.choose_backend("cuda")
    with pytest.raises(ConfigError, match="--backend"):
        D.DemoConfig(backend="numpy")
    assert D.DemoConfig().backend == "auto"


def test_tick_stats_percentiles_period_shares_and_the_share_outside_the_model():
    from tickformer.control import demo_tick as T

    tick = np.array([300_000] * 999 + [1_500_000])  # ns: one slow tick
    model = np.array([200_000] * 999 + [1_000_000])
    s = T.tick_stats(tick, model, 2_000_000)
    assert s["ticks"] == 1000 and s["period_us"] == 2000.0
    assert s["tick_p50_us"] == 300.0 and s["model_p50_us"] == 200.0 and s["outside_p50_us"] == 100.0
    assert s["tick_max_us"] == 1500.0 and 300.0 < s["tick_p99.9_us"] <= 1500.0
    assert s["tick_p50_period_share"] == 0.15
    assert s["tick_p99.9_period_share"] == pytest.approx(s["tick_p99.9_us"] / 2000.0)
    assert s["outside_model_share"] == pytest.approx((999 * 100 + 500) / (999 * 300 + 1500))
    assert s["outside_model_share_p50"] == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="same"):
        T.tick_stats(tick, model[:-1], 2_000_000)


class _SlowSession:
    """A model session whose peek and commit busy-wait (the model's share of a tick)."""

    def __init__(self, peek_ns: int, commit_ns: int) -> None:
        self.peek_ns, self.commit_ns, self.position = peek_ns, commit_ns, 0

    @staticmethod
    def _spin(ns: int) -> None:
        import time

        end = time.perf_counter_ns() + ns
        while time.perf_counter_ns() < end:
            pass

    def peek(self, x):
        self._spin(self.peek_ns)
        return x

    def commit(self, j):
        self._spin(self.commit_ns)
        self.position += 1


class _PeekingController:
    """Commit, peek, then the controller's own Python (a busy wait), then NominalMPC's decision."""

    def __init__(self, session, own_ns: int, candidates: int) -> None:
        self.session, self.own_ns, self.inner = session, own_ns, NominalMPC(candidates)

    def step(self, obs):
        self.session.commit(0)
        self.session.peek(obs)
        _SlowSession._spin(self.own_ns)
        return self.inner.step(obs)


def test_run_loop_times_the_whole_tick_and_the_model_calls_inside_it():
    """The tick is the controller's whole step (commit + peek + its own Python), the model time
    the session's calls alone, per tick: a controller spending 150 us in the model and 100 us of
    its own shows ticks of at least 250 us, model time of at least 150 us and a share outside
    the model of at least 100 / 250 of a tick; the per-tick model time is that tick's, not a sum
    over ticks. Lower bounds only: a loaded machine makes every time longer."""
    from tickformer.control import demo_tick as T

    cfg = D.DemoConfig(quick=True, ticks=120, period_ms=2.0, settle_ticks=20)
    sim = HiddenPlantSim(D.loop_plant(cfg), D.reference(cfg), cfg.ticks * 64, seed=0)
    slow = _SlowSession(peek_ns=100_000, commit_ns=50_000)
    timed = T.TimedSession(slow, cfg.ticks)
    r = D.run_loop(_PeekingController(timed, 100_000, cfg.candidates), sim, cfg, timed=timed)
    k = r["tick"]
    assert k["ticks"] == 120 and k["period_us"] == 2000.0
    assert k["tick_p50_us"] >= 250.0 and k["model_p50_us"] >= 150.0 and k["outside_p50_us"] >= 100.0
    assert k["model_p50_us"] < k["tick_p50_us"] and k["tick_p50_us"] <= k["tick_p99.9_us"] <= k["tick_max_us"]
    assert k["tick_p50_us"] == pytest.approx(r["step_p50_us"])  # the loop's own step time is the tick
    assert 0.1 < k["outside_model_share"] < 1.0 and 0.1 < k["outside_model_share_p50"] < 1.0
    assert k["tick_p50_period_share"] == pytest.approx(k["tick_p50_us"] / 2000.0)
    per_tick = timed.model_ns  # [ticks] every tick's model time, each about 150 us (not growing)
    assert per_tick.shape == (120,) and per_tick.min() >= 150_000
    assert np.median(per_tick[-10:]) < 3 * np.median(per_tick[:10])
    assert slow.position == 120 and timed.position == 120  # everything else is the session's
