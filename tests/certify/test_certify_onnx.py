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
    )


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
