"""`tickformer certify` on a bare ONNX model (certify/campaign.py `certify_onnx`): the step graph
of a KV-cache pair with its cache fed back (a growing cache: the last eighth of the positions
timed, after a sweep of all), or the full graph at one fixed shape; the same campaign,
statistics, pWCET and verdict as for an artifact. Short campaigns: the verdict is not the point,
the plumbing is."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "verify"))
from foreign_models import lm_pair, masked_model  # noqa: E402

from tickformer.artifact.foreign.spec import Flags  # noqa: E402
from tickformer.certify.campaign import CampaignConfig, certify_onnx  # noqa: E402
from tickformer.certify.decision import EXIT_CODES, EvtConfig, decide  # noqa: E402
from tickformer.cli import main  # noqa: E402

FAST = CampaignConfig(samples=1000, warmup=50, n_inputs=8)
EVT = EvtConfig(n_boot=40)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return lm_pair(tmp_path_factory.mktemp("pair") / "lm")


def test_step_mode_feeds_the_cache_back(pair):
    full, step = pair
    report, durations = certify_onnx(
        full, step=step, backend="ort", budget_ns=1e9, campaign=FAST, evt_config=EVT, max_len=8
    )
    assert durations.shape == (1000,) and (durations > 0).all()
    assert report["verdict"] in EXIT_CODES and report["exit_code"] == EXIT_CODES[report["verdict"]]
    camp, model = report["campaign"], report["conditions"]["model"]
    assert camp["static_cache"] is False and camp["max_len"] == 8 and camp["timed_positions"] == [7, 7]
    assert camp["position_check"]["sweep"] is not None  # a growing cache: every position swept first
    assert (
        model["mode"] == "step"
        and model["step_sha256"]
        and model["timed_input"]
        == {
            "name": "input_ids",
            "shape": [1, 1],
        }
    )
    # The verdict follows from the campaign's numbers by the one rule (campaign.decide), whatever
    # the loaded machine's tail does: asserting a verdict of a 1 s budget failed on a loaded machine
    # (a heavy-tailed fit extrapolates past any budget).
    assert report["over_budget"] == int(np.count_nonzero(durations > 1e9))
    assert report["stats"]["max"] == float(durations.max()) and report["stats"]["n"] == 1000
    assert (report["verdict"], report["reasons"]) == decide(
        observed_max_ns=report["stats"]["max"],
        budget_ns=1e9,
        evt=report["evt"],
        exceedance=report["exceedance"],
        fit_error=report["evt_error"],
        n=report["stats"]["n"],
        budget_exceedance=report["reach"]["budget_exceedance_per_step"],
    )[:2]


def test_full_mode_at_a_fixed_shape(tmp_path):
    path = masked_model(tmp_path / "m.onnx")
    report, _ = certify_onnx(
        path,
        backend="ort",
        budget_ns=1.0,
        campaign=FAST,
        evt_config=EVT,
        flags=Flags(domain=(-1.0, 1.0)),
        max_len=4,
    )
    assert report["verdict"] == "FAIL"  # a 1 ns budget
    assert report["conditions"]["model"]["mode"] == "full"
    assert report["conditions"]["model"]["sizes"] == {"batch": 1, "seq": 4}
    assert report["campaign"]["static_cache"] is True and report["campaign"]["max_len"] == 1


def test_session_steps_like_the_stepper(pair):
    """ForeignSession's step outputs are the pair's own: equal to the full pass at each position."""
    from tickformer.artifact.foreign.inference import open_signature
    from tickformer.runtime.foreign import ForeignSession, Graph

    full, step = pair
    sig, data, step_data = open_signature(full, flags=Flags(step=step))
    session = ForeignSession(
        sig,
        Graph(data, name="full"),
        Graph(step_data, name="step"),
        mode="step",
        sizes={"batch": 1, "seq": 5},
        max_len=5,
    )
    ids = session.make_inputs(5, 0)  # [5, 1, 1]
    got = [session.step(ids[t]).copy() for t in range(5)]  # 5 x [1, 1, V]
    feeds = dict(session.fixed)
    want = Graph(data, name="full").run(feeds)["logits"]  # [1, 5, V]
    np.testing.assert_allclose(np.concatenate(got, axis=1), want, rtol=1e-5, atol=1e-5)
    session.reset()
    assert session.position == 0


def test_cli_certifies_a_bare_model(pair, tmp_path):
    full, step = pair
    out = tmp_path / "cert"
    argv = ["certify", str(full), "--step", str(step), "--budget-us", "1000000", "--samples", "1000"]
    rc = main([*argv, "--warmup", "20", "--n-boot", "40", "--max-len", "6", "--out", str(out), "--quiet"])
    cert = json.loads((out / "certificate.json").read_text())
    assert rc == cert["exit_code"] and cert["conditions"]["model"]["kind"] == "onnx"
    assert cert["conditions"]["artifact_id"] == cert["conditions"]["model"]["full_sha256"]


# ----------------------------------------------------------------------------- recurrent state (issue 37)

FIXTURES = Path(__file__).resolve().parents[1] / "verify" / "fixtures"


@pytest.mark.parametrize(
    ("model", "step", "max_len"),
    [("gru/model.onnx", "gru/step.onnx", 16), ("lstm.onnx", None, 16), ("ssm_step.onnx", None, 64)],
    ids=["gru pair", "lstm, its own step graph", "one ssm step"],
)
def test_a_recurrent_state_is_fed_back_and_every_position_timed(model, step, max_len):
    """A fixed-size state costs the same at every position: static_cache, every position timed
    from 0; the LSTM (no --step) is its own step graph; a model that is one step with its state
    is stepped 64 positions before a reset, not reset at every step."""
    report, durations = certify_onnx(
        FIXTURES / model,
        step=None if step is None else FIXTURES / step,
        backend="ort",
        budget_ns=1e9,
        campaign=FAST,
        evt_config=EVT,
        flags=Flags(domain=(-1.0, 1.0)),
    )
    camp, cond = report["campaign"], report["conditions"]["model"]
    assert cond["mode"] == "step" and camp["static_cache"] is True
    assert camp["max_len"] == max_len and camp["timed_positions"] == [0, max_len - 1]
    assert durations.shape == (1000,)


def test_the_gru_session_steps_from_the_zero_state_and_reset_returns_to_it():
    """ForeignSession over the GRU pair: its outputs equal the full graph's at each position (the
    full graph starts from zeros), and after reset() the same inputs give the same outputs."""
    from tickformer.artifact.foreign.inference import open_signature
    from tickformer.runtime.foreign import ForeignSession, Graph

    sig, data, step_data = open_signature(
        FIXTURES / "gru/model.onnx", flags=Flags(domain=(-1.0, 1.0), step=FIXTURES / "gru/step.onnx")
    )
    session = ForeignSession(
        sig,
        Graph(data, name="full"),
        Graph(step_data, name="step"),
        mode="step",
        sizes={"batch": 1},
        max_len=6,
    )
    xs = session.make_inputs(6, 0)  # [6, 1, 1, F]
    first = [session.step(xs[t]).copy() for t in range(6)]
    want = Graph(data, name="full").run({"x": np.concatenate(list(xs), axis=1)})["y"]  # [1, 6, G]
    np.testing.assert_allclose(np.concatenate(first, axis=1), want, rtol=1e-5, atol=1e-5)
    session.reset()
    again = [session.step(xs[t]).copy() for t in range(6)]
    assert all(np.array_equal(a, b) for a, b in zip(first, again))


def test_certify_stops_a_loop_at_its_time_budget(tmp_path, capsys):
    from test_user_model_limits import loop_in_if

    path = loop_in_if(tmp_path / "loop.onnx")
    argv = ["certify", str(path), "--domain", "-1:1", "--budget-us", "1000", "--time-budget", "1.5"]
    assert main([*argv, "--out", str(tmp_path / "c"), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Loop node 'spin' ran past the wall-clock budget of 1.5 s" in err[0], err
    assert "Loop 'spin': a Loop of 2^62 trips" in err[0]
