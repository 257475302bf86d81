"""Any gymnasium environment as a plant (control/gym_plant.py) and the project's own pendulum
behind the Env API (control/gym_pendulum.py): the log's columns and runs against what a recording
env really saw, the refusals, the loop's clipping and skipped ticks, and the chain end to end
(log gym:Pendulum-v1 -> train --data -> export -> a closed loop through the adapter)."""

from __future__ import annotations

import json

import numpy as np
import pytest

gym = pytest.importorskip("gymnasium", reason="the plant extra (gymnasium[mujoco]) is not installed")

from tickformer.control import gym_plant as G  # noqa: E402
from tickformer.errors import ConfigError  # noqa: E402


class Recording(gym.Env):
    """A deterministic env that records every action it is sent: observation (10 t + k, -t) for
    episode k at tick t, action bounds [-0.5, 2] (not symmetric), the episode truncated after
    `length` steps, dt 0.25."""

    metadata = {"render_modes": []}
    dt = 0.25

    def __init__(self, length: int = 7, n_act: int = 1) -> None:
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)
        self.action_space = gym.spaces.Box(np.full(n_act, -0.5), np.full(n_act, 2.0), (n_act,), np.float64)
        self.length, self.k, self.t = length, -1, 0
        self.sent: list[np.ndarray] = []
        self.seen: list[np.ndarray] = []

    def _obs(self) -> np.ndarray:
        o = np.array([10.0 * self.t + self.k, -float(self.t)])
        self.seen.append(o)
        return o

    def reset(self, *, seed=None, options=None):  # type: ignore[override]
        super().reset(seed=seed)
        self.k, self.t = self.k + 1, 0
        return self._obs(), {}

    def step(self, action):  # type: ignore[override]
        self.sent.append(np.array(action, np.float64))
        self.t += 1
        return self._obs(), 0.0, False, self.t >= self.length, {}


def test_the_log_holds_the_actions_sent_and_the_observations_seen_one_run_per_episode():
    env = Recording(length=7)
    cols = G.log_episodes(env, runs=2, rows=10, seed=3)
    assert list(cols) == ["time [s]", "run", "act0", "obs0", "obs1"]
    assert cols["run"].size == 20
    np.testing.assert_array_equal(cols["act0"], np.concatenate(env.sent)[:20])
    # the observation of each row is the one the env returned before that row's action:
    # (10 t + k, -t) at tick t of episode k (each episode one run here)
    tick = cols["time [s]"] / 0.25
    np.testing.assert_array_equal(cols["obs0"], 10.0 * tick + cols["run"])
    np.testing.assert_array_equal(cols["obs1"], -tick)
    # runs: the env truncated after 7 steps -> runs of 7, 3, 7, 3
    assert list(np.unique(cols["run"], return_counts=True)[1]) == [7, 3, 7, 3]
    assert np.all(np.diff(cols["run"]) >= 0)
    # time restarts in each run, at the env's dt
    starts = np.flatnonzero(np.diff(cols["run"], prepend=-1))
    assert np.all(cols["time [s]"][starts] == 0.0)
    np.testing.assert_allclose(cols["time [s]"][:7], np.arange(7) * 0.25)
    # the exploration spans the env's own bounds [-0.5, 2], not [-1, 1]
    assert cols["act0"].min() >= -0.5 and cols["act0"].max() <= 2.0 and cols["act0"].max() > 1.2


def test_the_columns_are_named_from_the_spaces_and_a_wide_action_gets_one_column_each():
    env = Recording(n_act=2)
    assert G.columns(env) == (["act0", "act1"], ["obs0", "obs1"])
    cols = G.log_episodes(env, runs=1, rows=5, seed=0)
    np.testing.assert_array_equal(np.stack([cols["act0"], cols["act1"]], 1), np.stack(env.sent))


@pytest.mark.parametrize(
    "space, where, words",
    [
        ("discrete_action", "action", "not a continuous Box"),
        ("image_obs", "observation", "not one dimension"),
        ("unbounded_action", "action", "unbounded"),
    ],
)
def test_spaces_other_than_flat_bounded_boxes_are_refused_with_the_fix(space, where, words):
    env = Recording()
    if space == "discrete_action":
        env.action_space = gym.spaces.Discrete(3)
    elif space == "image_obs":
        env.observation_space = gym.spaces.Box(0, 1, (4, 4), np.float32)
    else:
        env.action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float64)
    with pytest.raises(ConfigError, match=words) as e:
        G.make_env(env)
    assert where in str(e.value) and "\n" not in str(e.value)


def test_an_object_without_the_env_api_and_unknown_ids_are_refused():
    with pytest.raises(ConfigError, match="gymnasium.Env"):
        G.make_env(object())
    with pytest.raises(ConfigError, match="gymnasium cannot make it"):
        G.make_env("gym:NoSuchEnv-v0")
    with pytest.raises(ConfigError, match="names no environment"):
        G.make_env("gym:")


def test_the_projects_pendulum_passes_gymnasiums_own_check_and_repeats_with_its_seed():
    from gymnasium.utils.env_checker import check_env

    from tickformer.control.gym_pendulum import ENV_ID, EPISODE_TICKS

    env = G.make_env(f"gym:{ENV_ID}")
    with pytest.warns(UserWarning):  # gymnasium's note on the unbounded observation space
        check_env(env.unwrapped)
    a, info = env.reset(seed=5)
    b, _ = env.reset(seed=5)
    np.testing.assert_array_equal(a, b)
    assert set(info["params"]) >= {"mass", "length", "damping", "gain"}
    assert env.spec.max_episode_steps == EPISODE_TICKS and G.period_s(env) == pytest.approx(0.1)


def test_the_loop_clips_to_the_envs_bounds_and_holds_the_action_through_skipped_ticks():
    env = Recording(length=100)
    sim = G.GymSim(env, [1, 0], seed=0)
    obs = sim.observe(0)
    assert obs[0] == 1.0 and obs[1] == 0  # a fresh episode, nothing skipped
    np.testing.assert_array_equal(obs[2:4], [0.0, 0.0])  # (obs1, obs0) at t 0
    sim.actuate(np.array([9.0]))
    sim.actuate(np.array([-9.0]))
    assert [float(a[0]) for a in env.sent] == [2.0, -0.5]  # the env's bounds, not +-1 or none
    obs = sim.observe(5)  # ticks 2, 3, 4 skipped: the action held
    assert [float(a[0]) for a in env.sent[2:]] == [-0.5] * 3
    assert obs[0] == 0.0 and obs[1] == 3 and obs[4] == -0.5
    np.testing.assert_array_equal(obs[2:4], [-5.0, 50.0])  # measured now, model order (obs1, obs0)
    np.testing.assert_array_equal(obs[5:11].reshape(3, 2)[:, 1], [20.0, 30.0, 40.0])  # the skipped ticks


def test_a_model_trained_on_reordered_outputs_reads_its_own_observations():
    signals = {
        "inputs": [
            {"name": "act0", "role": "input"},
            {"name": "obs2", "role": "output"},
            {"name": "obs0", "role": "output"},
        ]
    }
    assert G.model_columns(signals) == ("act0", [2, 0])
    signals["inputs"][0]["name"] = "command"
    with pytest.raises(ConfigError, match="--inputs act0"):
        G.model_columns(signals)


@pytest.mark.slow
def test_log_train_export_and_a_closed_loop_on_gymnasiums_pendulum(tmp_path, capsys):
    """The user's chain on gymnasium's classic Pendulum-v1 (no MuJoCo), small budgets (~15 s)."""
    import pyarrow.parquet as pq

    from tickformer import runtime
    from tickformer.cli import main

    log, ckpt, art = tmp_path / "p.parquet", tmp_path / "ck", tmp_path / "art"
    assert main(["log", "gym:Pendulum-v1", "--out", str(log), "--runs", "3", "--rows", "300"]) == 0
    table = pq.read_table(log).to_pydict()
    assert list(table) == ["time [s]", "run", "act0", "obs0", "obs1", "obs2"]
    assert len(set(table["run"])) == 6  # Pendulum-v1 truncates at 200 ticks: 200 + 100 per episode
    assert max(abs(a) for a in table["act0"]) <= 2.0  # its bounds
    assert main(["train", "--data", str(log), "--inputs", "act0", "--outputs", "obs0,obs1,obs2",
                 "--episode", "run", "--time", "time", "--horizon", "2", "--steps", "60", "--quiet",
                 "--out", str(ckpt)]) == 0  # fmt: skip
    assert main(["export", str(ckpt), "--out", str(art), "--batch", "9"]) == 0
    env = G.make_env("gym:Pendulum-v1")
    with runtime.load(str(art), backend="ort", threads=1) as s:
        _, idx = G.model_columns(G.model_signals(s))
        ctl = G.GymMPC(s, -2.0, 2.0, G.QuadraticCost([1.0, 0.0, 0.0]))
        r = G.run_loop(env, ctl, 250, out_idx=idx, seed=1)
    assert r["loop_ticks"] == 250 and r["deadline_misses"] == 0 and r["faults"] == 0
    assert r["episodes_ended"] == 1 and ctl.episodes == 2  # a fresh history after the env's reset
    assert ctl.mpc.replaced == 0  # every committed token is the candidate the env got
    assert np.isfinite(r["reward"]) and r["period_s"] == pytest.approx(0.05)


@pytest.mark.slow
def test_the_gym_chain_as_one_command(tmp_path, capsys):
    from tickformer.cli import main

    out = tmp_path / "hp"
    argv = ["plant", "gym:tickformer/HiddenPendulum-v0", "--quick", "--out", str(out), "--draws", "1"]
    assert main([*argv, "--ticks", "80"]) == 0
    s = json.loads((out / "plant_summary.json").read_text())
    assert [c["command"].split()[1] for c in s["steps"]] == ["log", "train", "export"]
    assert f"--batch {G.CANDIDATES} " in s["steps"][2]["command"] + " "  # one peek: GymMPC's candidates
    assert set(s["loop"]) == {"model", "hold"} and s["loop"]["model"]["ticks"] == 80
    assert s["target"] == [0.0] and "mean reward per tick" in capsys.readouterr().out


def test_the_pendulum_env_is_the_demos_plant_its_command_late_by_the_delay():
    from tickformer.control.gym_pendulum import pendulum_env_class
    from tickformer.control.plant import HiddenPendulum, hidden_rollout

    p = HiddenPendulum(mass=1.3, length=0.8, damping=0.6, gain=2.5, delay=2)
    env = pendulum_env_class()()
    env.reset(seed=0, options={"params": p})
    start = np.array([env.theta, env.omega])
    commands = np.array([0.9, -0.4, 0.3, 1.7, -0.2, 0.0])  # 1.7: clipped to 1
    states = [env.step(np.array([c], np.float32))[4]["state"] for c in commands]
    want = hidden_rollout(start, commands.astype(np.float32).astype(np.float64), p)[1:]
    np.testing.assert_allclose(np.array(states), want, rtol=1e-9, atol=1e-12)
