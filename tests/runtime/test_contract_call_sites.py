"""The runtime calls the proven functions themselves (issue 18): swap a contract function for its
wrong twin where the runtime imported it and the runtime's behaviour changes; an AST check names
every call site, so a re-written copy of the arithmetic would be caught."""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

import tickformer.codegen  # noqa: F401  (registers backend "c"'s library builder: runtime/backends/c.py)
from tickformer import runtime
from tickformer.contracts import position
from tickformer.errors import ContextFull
from tickformer.verify.proofs import wrong_twins

ROOT = Path(runtime.__file__).resolve().parent


def _calls(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def _imported_from(path: Path, module: str) -> set[str]:
    tree = ast.parse(path.read_text())
    return {
        a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module == module
        for a in n.names
    }


@pytest.mark.parametrize(
    ("file", "module", "names"),
    [
        ("session.py", "tickformer.contracts.position", {"can_step", "step_position", "reset_position"}),
        ("control_loop.py", "tickformer.contracts.deadline", {"release_time", "next_tick", "deadline_of"}),
    ],
)
def test_the_runtime_imports_and_calls_the_proven_functions(file, module, names):
    path = ROOT / file
    assert names <= _imported_from(path, module)
    assert names <= _calls(path)


def _x(session):
    return np.zeros(session.input_shape, dtype=session.input_dtype)


def test_the_session_context_check_is_the_proven_can_step(tiny_art, monkeypatch):
    path = tiny_art[0] if isinstance(tiny_art, tuple) else tiny_art
    s = runtime.load(path, backend="numpy")
    for _ in range(s.max_len):  # the real predicate: every one of the max_len slots is usable
        s.step(_x(s))
    with pytest.raises(ContextFull):
        s.step(_x(s))
    monkeypatch.setattr("tickformer.runtime.session.can_step", wrong_twins.can_step_strict)
    s = runtime.load(path, backend="numpy")
    for _ in range(s.max_len - 1):
        s.step(_x(s))
    with pytest.raises(ContextFull):  # the twin refuses the last slot: the session follows it
        s.step(_x(s))


def test_the_session_advances_by_the_proven_step_position(tiny_art, monkeypatch):
    path = tiny_art[0] if isinstance(tiny_art, tuple) else tiny_art
    s = runtime.load(path, backend="numpy")
    assert s._next_position == [position.step_position(p, 1, s.max_len, True) for p in range(s.max_len)]
    monkeypatch.setattr("tickformer.runtime.session.step_position", lambda p, n, m, ok: p)  # never advances
    s = runtime.load(path, backend="numpy")
    s.step(_x(s))
    assert s.position == 0


def test_the_numpy_backend_static_mask_is_the_proven_cache_row_live(tiny_art, monkeypatch):
    """runtime/backends/numpy.py builds its static live mask by calling masking.cache_row_live on
    index arrays: the table is the predicate's, and with the wrong twin (row <= pos: also reads the
    row not yet written) swapped in at the call site, the outputs change."""
    from tickformer.contracts import masking

    path = tiny_art[0] if isinstance(tiny_art, tuple) else tiny_art
    s = runtime.load(path, backend="numpy")
    n = s.max_len
    assert s.backend._live.tolist() == [[masking.cache_row_live(r, p) for r in range(n)] for p in range(n)]
    rng = np.random.default_rng(2)
    xs = [rng.uniform(-1, 1, size=(1, 1, 3)).astype(np.float32) for _ in range(5)]
    want = [s.step(x).copy() for x in xs]
    monkeypatch.setattr(
        "tickformer.runtime.backends.numpy.cache_row_live", wrong_twins.cache_row_live_inclusive
    )
    bad = runtime.load(path, backend="numpy")
    got = [bad.step(x).copy() for x in xs]
    assert any(not np.array_equal(a, b) for a, b in zip(want, got))


# numpy scores every cache row, stale ones too (q . inf is inf or NaN there) and selects afterwards:
# the warning is the poison being computed and then selected out, which is what the test shows
@pytest.mark.filterwarnings("ignore:invalid value encountered in matmul:RuntimeWarning")
@pytest.mark.parametrize("backend", ["numpy", "ort", "c"])
@pytest.mark.parametrize("poison", [np.inf, -np.inf, np.nan])
def test_stale_rows_holding_inf_or_nan_do_not_leak(tiny_art, backend, poison):
    """Stale cache rows (at and after the position, e.g. left by a sequence before reset()) filled
    with inf / -inf / NaN: every backend's outputs are bit for bit those of a clean run."""
    if backend == "c":
        pytest.importorskip("cffi")
    path = tiny_art[0] if isinstance(tiny_art, tuple) else tiny_art
    rng = np.random.default_rng(1)
    xs = [rng.uniform(-1, 1, size=(1, 1, 3)).astype(np.float32) for _ in range(6)]
    try:
        clean = runtime.load(path, backend=backend)
    except Exception as exc:  # a backend this machine cannot build (no compiler)
        pytest.skip(f"backend {backend} unavailable here: {exc}")
    want = [clean.step(x).copy() for x in xs]
    dirty = runtime.load(path, backend=backend)
    k, v = dirty.backend.cache()
    k[...] = poison
    v[...] = poison
    got = []
    for x in xs:
        got.append(dirty.step(x).copy())
    # the poisoned arrays are the backend's own cache: the committed rows overwrote the poison
    assert np.isfinite(v[:, :, :, : len(xs)]).all() and not np.isfinite(v[:, :, :, len(xs) :]).any()
    for a, b in zip(want, got):
        assert np.isfinite(b).all() and a.tobytes() == b.tobytes(), (backend, poison)


@pytest.mark.parametrize("backend", ["numpy", "ort"])
@pytest.mark.parametrize("poison", [np.inf, -np.inf, np.nan])
def test_stale_ring_slots_holding_inf_or_nan_do_not_leak(window_art, backend, poison):
    """The ring cache (window 4): every slot poisoned at load and again after a reset (when every
    slot is stale), stepped through wrap-around before and after: outputs bit for bit a clean
    session's. The step reads a slot only while its position is in the window (slot_read), and
    selects V rows too."""
    path = window_art[0]
    rng = np.random.default_rng(5)
    xs = [rng.uniform(-1, 1, size=(1, 1, 3)).astype(np.float32) for _ in range(17)]

    def run(session, poison_value=None):
        ys = []
        for t, x in enumerate(xs):
            if t in (0, 9):
                if t:
                    session.reset()
                if poison_value is not None:
                    k, v = session.backend.cache()  # the backend's own ring (views)
                    k[...] = poison_value
                    v[...] = poison_value
            ys.append(session.step(x).copy())
            if poison_value is not None and t in (0, 9):  # the poison is in the ring the step read
                assert not np.isfinite(session.backend.cache()[1]).all()
        return ys

    want = run(runtime.load(path, backend=backend))
    with np.errstate(invalid="ignore", over="ignore"):
        got = run(runtime.load(path, backend=backend), poison)
    for t, (a, b) in enumerate(zip(want, got)):
        assert np.isfinite(b).all() and a.tobytes() == b.tobytes(), (backend, poison, t)
