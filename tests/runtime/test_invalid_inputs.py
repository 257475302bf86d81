"""Invalid calls raise a specific error naming the problem and leave position and cache exactly
unchanged (the session commits cache rows only after the backend and the contracts succeeded).

The stateful test drives random interleavings of valid steps, invalid steps, resets and full
passes against a simple model of the expected state: the inputs accepted since the last reset.
Expected outputs come from the numpy model's full pass over that history (stated fp32
tolerance); expected caches must be bitwise unchanged by every failed call.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from tickformer import runtime
from tickformer.artifact.reader import Artifact
from tickformer.errors import BackendError, ContextFull, ContractViolation, InputError, SessionClosed
from tickformer.model import forward
from tickformer.runtime.session import Session

BACKENDS = [("numpy", {}), ("ort", {"binding": "run"}), ("ort", {"binding": "iobinding"})]
IDS = ["numpy", "ort-run", "ort-iobinding"]


def snapshot(session):
    k, v = session.backend.cache()
    return session.position, k.copy(), v.copy()


def assert_unchanged(session, before):
    pos, k, v = before
    k_now, v_now = session.backend.cache()
    assert session.position == pos
    assert np.array_equal(k_now, k) and np.array_equal(v_now, v), "a failed call modified the KV cache"


def bad_inputs(d_in):
    good = np.zeros((1, 1, d_in), dtype=np.float32)
    nan, inf, big, low = good.copy(), good.copy(), good.copy(), good.copy()
    nan[0, 0, 1] = np.nan
    inf[0, 0, 0] = -np.inf
    big[0, 0, 2] = 10.5  # domain is [-10, 10]
    low[0, 0, 0] = -1e30
    return {
        "float64": (good.astype(np.float64), "float32"),
        "shape [1, d_in]": (good[0], "shape"),
        "shape [1, 2, d_in]": (np.zeros((1, 2, d_in), np.float32), "shape"),
        "wrong d_in": (np.zeros((1, 1, d_in + 1), np.float32), "shape"),
        "list": ([[[0.0] * d_in]], "ndarray"),
        "NaN": (nan, "non-finite"),
        "-Inf": (inf, "non-finite"),
        "above domain": (big, "outside the declared domain"),
        "far below domain": (low, "outside the declared domain"),
    }


@pytest.mark.parametrize(("backend", "opts"), BACKENDS, ids=IDS)
def test_each_invalid_input_raises_named_error_and_changes_nothing(tiny_art, seq_for, backend, opts):
    path, _ = tiny_art
    session = runtime.load(path, backend=backend, **opts)
    seq = seq_for(session.config, 1, 4, seed=3)
    for t in range(3):
        session.step(seq[:, t : t + 1].copy())
    for _name, (x, words) in bad_inputs(session.config.d_in).items():
        before = snapshot(session)
        with pytest.raises(InputError, match=words):
            session.step(x)
        assert_unchanged(session, before)


def test_token_ids_outside_vocab_rejected(tokens_art):
    path, _ = tokens_art
    session = runtime.load(path, backend="ort")
    session.step(np.array([[3]], dtype=np.int64))
    for bad in (np.array([[-1]], dtype=np.int64), np.array([[11]], dtype=np.int64)):
        before = snapshot(session)
        with pytest.raises(InputError, match="outside the vocabulary"):
            session.step(bad)
        assert_unchanged(session, before)
    with pytest.raises(InputError, match="int64"):
        session.step(np.array([[3]], dtype=np.int32))


@pytest.mark.parametrize(("backend", "opts"), BACKENDS, ids=IDS)
def test_context_full_past_max_len(tiny_art, seq_for, backend, opts):
    path, _ = tiny_art
    session = runtime.load(path, backend=backend, **opts)
    seq = seq_for(session.config, 1, session.max_len, seed=4)
    for t in range(session.max_len):
        session.step(seq[:, t : t + 1].copy())
    before = snapshot(session)
    with pytest.raises(ContextFull, match="reset"):
        session.step(seq[:, :1].copy())
    assert_unchanged(session, before)
    session.reset()
    session.step(seq[:, :1].copy())
    assert session.position == 1


def test_closed_session_raises(tiny_art):
    path, _ = tiny_art
    session = runtime.load(path, backend="ort")
    session.close()
    session.close()  # idempotent
    for call in (
        lambda: session.step(np.zeros((1, 1, 3), np.float32)),
        session.reset,
        lambda: session.run(np.zeros((1, 2, 3), np.float32)),
    ):
        with pytest.raises(SessionClosed, match="load the artifact again"):
            call()


@pytest.mark.parametrize("binding", ["run", "iobinding"])
def test_backend_failure_leaves_state_unchanged(tiny_art, seq_for, monkeypatch, binding):
    path, _ = tiny_art
    session = runtime.load(path, backend="ort", binding=binding)
    seq = seq_for(session.config, 1, 3, seed=1)
    session.step(seq[:, :1].copy())
    before = snapshot(session)

    def broken(*args):
        raise RuntimeError("simulated onnxruntime failure")

    monkeypatch.setattr(session.backend._step, "run", broken)
    if session.backend._runs:  # iobinding: step() calls ORT's bound C++ run (ort.py _iobinding_runner)
        monkeypatch.setattr(session.backend, "_runs", [broken])
    with pytest.raises(BackendError, match="position 1"):
        session.step(seq[:, 1:2].copy())
    assert_unchanged(session, before)


def test_contract_violation_in_check_mode_leaves_state_unchanged(tiny_art, seq_for):
    path, _ = tiny_art
    loaded = runtime.open_artifact(path)
    strict = Artifact(
        root=loaded.root, manifest={**loaded.manifest, "output_bound": 1e-6}, config=loaded.config
    )
    backend_cls = runtime.backend_class("ort")
    session = Session(strict, backend_cls(strict), contracts="check")
    before = snapshot(session)
    with pytest.raises(ContractViolation, match="output_bound"):
        session.step(seq_for(session.config, 1, 1, seed=2))
    assert_unchanged(session, before)
    monitor = Session(strict, backend_cls(strict), contracts="monitor")
    monitor.step(seq_for(session.config, 1, 1, seed=2))
    assert monitor.position == 1 and monitor.monitor.summary()["contracts"]["output_bound"]["violations"] == 1


def test_run_validates_too(tiny_art, seq_for):
    path, _ = tiny_art
    session = runtime.load(path, backend="ort")
    seq = seq_for(session.config, 1, 4, seed=1)
    with pytest.raises(ContextFull, match="max-len"):
        session.run(np.zeros((1, session.max_len + 1, 3), np.float32))
    with pytest.raises(InputError, match="shape"):
        session.run(seq[0])
    bad = seq.copy()
    bad[0, 2, 1] = np.inf
    with pytest.raises(InputError, match="non-finite"):
        session.run(bad)


class SessionMachine(RuleBasedStateMachine):
    """Random interleavings of valid/invalid calls against the model `history` (inputs since reset)."""

    def __init__(self):
        super().__init__()
        self.session = None

    @initialize(backend=st.sampled_from(range(len(BACKENDS))))
    def open(self, backend):
        name, opts = BACKENDS[backend]
        self.session = runtime.load(ART[0], backend=name, **opts)
        self.params = ART[1]
        self.history: list[np.ndarray] = []

    @rule(values=st.lists(st.floats(-10, 10, width=32), min_size=3, max_size=3))
    def valid_step(self, values):
        self._step(np.asarray(values, dtype=np.float32).reshape(1, 1, 3))

    @rule(n=st.integers(1, 8), seed=st.integers(0, 2**16))
    def several_valid_steps(self, n, seed):
        """Reaches max_len (and ContextFull) within a few rules."""
        xs = np.random.default_rng(seed).uniform(-10, 10, size=(n, 1, 1, 3)).astype(np.float32)
        for x in xs:
            self._step(x)

    def _step(self, x):
        if len(self.history) == self.session.max_len:
            before = snapshot(self.session)
            with pytest.raises(ContextFull):
                self.session.step(x)
            assert_unchanged(self.session, before)
            return
        y = self.session.step(x).copy()
        self.history.append(x)
        want = forward(self.params, self.session.config, np.concatenate(self.history, axis=1))[:, -1:]
        tol = self.session.artifact.tolerance
        assert np.all(np.abs(y - want) <= tol["atol"] + tol["rtol"] * np.abs(want))

    @rule(kind=st.sampled_from(sorted(bad_inputs(3))))
    def invalid_step(self, kind):
        x, words = bad_inputs(3)[kind]
        before = snapshot(self.session)
        with pytest.raises(InputError, match=words):
            self.session.step(x)
        assert_unchanged(self.session, before)

    @rule()
    def reset(self):
        self.session.reset()
        self.history = []

    @rule()
    def full_pass_does_not_touch_state(self):
        before = snapshot(self.session)
        self.session.run(np.zeros((1, 2, 3), np.float32))
        assert_unchanged(self.session, before)

    @invariant()
    def position_matches_model(self):
        if self.session is not None:
            assert self.session.position == len(self.history)


ART: tuple = ()


def test_random_interleavings_keep_state_consistent(tiny_art):
    global ART
    ART = tiny_art
    run = settings(max_examples=25, stateful_step_count=40, deadline=None)(SessionMachine).TestCase
    run().runTest()


def test_seq2seq_misuse_is_named(seq2seq_art):
    path, _ = seq2seq_art
    session = runtime.load(path, backend="ort")
    with pytest.raises(InputError, match="set_source"):
        session.step(np.array([[1]], dtype=np.int64))
    with pytest.raises(InputError, match="decoder-only"):
        session.run(np.zeros((1, 3), np.int64))
    with pytest.raises(InputError, match="vocabulary"):
        session.set_source(np.array([[1, 7]], dtype=np.int64))
    with pytest.raises(ContextFull, match="source length 13"):
        session.set_source(np.ones((1, 13), dtype=np.int64))
    with pytest.raises(InputError, match="bos=9"):
        session.generate(np.array([[1, 2]], dtype=np.int64), 3, bos=9)
    before = snapshot(session)
    assert session.position == 0
    session.set_source(np.array([[1, 2]], dtype=np.int64))
    session.step(np.array([[1]], dtype=np.int64))
    assert session.position == 1 and not np.array_equal(session.backend.cache()[0], before[1])
