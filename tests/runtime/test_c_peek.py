"""Backend c's candidate entry (codegen/peek.py: tf_peek, tf_commit_candidate) beyond the
peek tests every backend runs (tests/runtime/test_peek.py, parametrized over "c"):

- tf_peek reads ONE history, batch row 0's cache: poisoning every other row's cache (NaN, inf)
  changes no output bit of a peek;
- a batched step whose rows differ makes the rows' histories differ: the backend then runs the
  per-row tf_stage, so a later peek still equals the numpy backend's (per-row) semantics;
- mutants of the generated text (the values' order, the own key's bias, the commit into one
  row only, the candidates reading row 1's cache) are caught by the equality with plain steps
  or by the one-history read -- the checks can fail;
- peek + commit allocate nothing traced on backend c.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import tickformer.codegen  # noqa: F401  (registers backend "c"'s library builder)
from tickformer import runtime
from tickformer.codegen import model_sources, plan_for
from tickformer.codegen.toolchain import compile_flags
from tickformer.errors import BackendError
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset
from tickformer.runtime import open_artifact

K = 4


@pytest.fixture(scope="module")
def static_art(tmp_path_factory):
    config = preset("tiny")
    out = tmp_path_factory.mktemp("cpeek") / "art"
    export_params(config, init_params(config, 5), out, batch=K)
    return out


@pytest.fixture(scope="module")
def ring_art(tmp_path_factory):
    config = preset("tiny").replace(window=4)
    params = init_params(config, 6)
    rng = np.random.default_rng(6)
    for name in [n for n in params if n.endswith("rel_bias")]:  # init's distance-0 column is 0: make it not
        params[name] = rng.normal(0, 0.5, params[name].shape).astype(np.float32)
    out = tmp_path_factory.mktemp("cpeek-ring") / "art"
    export_params(config, params, out, batch=K)
    return out


def _inputs(config, steps, seed):
    rng = np.random.default_rng(seed)
    return rng.uniform(-3, 3, size=(steps, K, 1, config.d_in)).astype(np.float32)  # [steps, K, 1, d_in]


def _peek_equals_plain_steps(a, b, steps, seed) -> bool:
    """Session a peeks and commits candidate t % K; session b steps with every row that
    candidate. True when outputs and caches (every row) agree bit for bit at every step."""
    xs = _inputs(a.config, steps, seed)
    for t in range(steps):
        ya = a.peek(xs[t]).copy()
        choice = t % K
        a.commit(choice)
        yb = b.step(np.ascontiguousarray(np.broadcast_to(xs[t, choice], xs[t].shape)))
        (ka, va), (kb, vb) = a.backend.cache(), b.backend.cache()
        if not (np.array_equal(ya[choice], yb[choice]) and np.array_equal(ka, kb) and np.array_equal(va, vb)):
            return False
    return True


@pytest.mark.parametrize("which", ["static_art", "ring_art"])
def test_peek_and_commit_equal_plain_steps_with_a_trained_looking_bias(request, which, compiler):
    """test_peek.py's equality on this module's artifacts: the ring's relative-position bias is
    drawn, distance 0 included (the init's is 0 there, which would hide a dropped own-key bias)."""
    art = request.getfixturevalue(which)
    assert _peek_equals_plain_steps(
        runtime.load(art, backend="c"), runtime.load(art, backend="c"), 12, seed=9
    )


def _reads_row_0_only(s) -> bool:
    """Six ticks of peek + commit from a reset, then: NaN and inf planted in every batch row's
    committed cache but row 0's change no bit of a peek's outputs (nor make the step refuse them)."""
    s.reset()
    xs = _inputs(s.config, 7, seed=3)
    for t in range(6):
        s.peek(xs[t])
        s.commit(t % K)
    clean = s.peek(xs[6]).copy()
    k, v = s.backend.cache()
    k[:, 1:] = np.nan
    v[:, 1:] = np.inf
    try:
        return bool(np.array_equal(s.peek(xs[6]), clean))
    except BackendError:  # a non-finite output: the planted rows were read
        return False


@pytest.mark.parametrize("which", ["static_art", "ring_art"])
def test_peek_reads_batch_row_0s_cache_only(request, which, compiler):
    """The shared history is read once, from row 0: NaN and inf planted in every other row's
    committed cache change no bit of a peek's outputs."""
    assert _reads_row_0_only(runtime.load(request.getfixturevalue(which), backend="c"))


@pytest.mark.parametrize("which", ["static_art", "ring_art"])
def test_peek_after_steps_whose_rows_differ_matches_numpy(request, which, compiler):
    """Rows stepped with different inputs hold different histories; a later peek must attend over
    each row's own (numpy's semantics), not row 0's: backend c falls back to tf_stage. Compared
    with numpy within the artifact's tolerance (the two differ in summation order only)."""
    art = request.getfixturevalue(which)
    c, ref = runtime.load(art, backend="c"), runtime.load(art, backend="numpy")
    xs = _inputs(c.config, 10, seed=4)
    rtol, atol = c.artifact.tolerance["rtol"], c.artifact.tolerance["atol"]
    for t in range(5):
        np.testing.assert_allclose(c.step(xs[t]), ref.step(xs[t]), rtol=rtol, atol=atol)
    for t in range(5, 10):
        np.testing.assert_allclose(c.peek(xs[t]), ref.peek(xs[t]), rtol=rtol, atol=atol)
        c.commit(t % K)
        ref.commit(t % K)
    c.reset()
    ref.reset()
    assert c.backend._shared  # after a reset the rows hold one (empty) history again


@pytest.mark.parametrize("which", ["static_art", "ring_art"])
def test_peek_with_a_deferred_commit_equals_immediate_commits(request, which, compiler):
    """deferred_commit=True: a plain step leaves its commit pending; after a reset the next peek
    (tf_peek) applies it first, as tf_stage_pending does. Outputs and the committed cache equal
    those of immediate commits at every tick (peeks, plain steps, a reset right after a plain step)."""
    art = request.getfixturevalue(which)
    a = runtime.load(art, backend="c", deferred_commit=True)
    b = runtime.load(art, backend="c")
    xs = _inputs(a.config, 24, seed=12)
    for t in range(24):
        if t % 7 == 3:  # a plain step: its rows' histories may differ from here
            ya, yb = a.step(xs[t]).copy(), b.step(xs[t]).copy()
        else:
            ya, yb = a.peek(xs[t]).copy(), b.peek(xs[t]).copy()
            a.commit(t % K)
            b.commit(t % K)
        if t == 10:  # the plain step of t = 10 still pending in a: the next peek applies it
            a.reset()
            b.reset()
        np.testing.assert_array_equal(ya, yb)
        if t % 7 != 3:  # cache() applies a pending commit: leave the plain steps' to the next call
            (ka, va), (kb, vb) = a.backend.cache(), b.backend.cache()
            np.testing.assert_array_equal(ka, kb)
            np.testing.assert_array_equal(va, vb)


def _mutant_library(art, tmp_path, compiler, old: str, new: str):
    """The generated library with the LAST `old` in tf_model.c replaced by `new` (the candidate
    entry is emitted after the step, so its copy of a shared line is the last)."""
    sources = model_sources(plan_for(open_artifact(art)))
    text = sources["tf_model.c"].decode()
    assert old in text, old
    head, _, tail = text.rpartition(old)
    (tmp_path / "tf_model.c").write_text(head + new + tail)
    (tmp_path / "tf_model.h").write_bytes(sources["tf_model.h"])
    out = tmp_path / "libtf_model.so"
    subprocess.run(
        [compiler.path, *compile_flags(compiler), "tf_model.c", "-o", str(out)],
        cwd=tmp_path,
        check=True,
        capture_output=True,
    )
    return out


def _values(u: int) -> str:
    return f"x{u} * tf_and_bits(w{u}[o], m{u})"


MUTANTS = {
    # the values' pass adds two unrolled rows in the other order (the sum rounds differently)
    "values order": (
        "static_art",
        f"(((yh[o] + {_values(0)}) + {_values(1)})",
        f"(((yh[o] + {_values(1)}) + {_values(0)})",
    ),
    # candidate i's rows committed into its own batch row only
    "commit one row": (
        "static_art",
        "s->k[l][b][hd][d][row] = s->k_new[l][i][hd][d];",
        "s->k[l][i][hd][d][row] = s->k_new[l][i][hd][d];",
    ),
    # the ring's own-key bias dropped in the candidate attention (the last occurrence is tf_attention_k's)
    "own bias": ("ring_art", "            s_own = s_own + bias[", "            s_own = s_own + 0.0f * bias["),
    # the candidates attend over batch row 1's keys and values, not row 0's
    "row 1's cache": (
        "ring_art",
        "&s->k[l][0][0][0][0], &s->v[l][0][0][0][0]",
        "&s->k[l][1][0][0][0], &s->v[l][1][0][0][0]",
    ),
}


def _caught(art, library) -> bool:
    """True when the library at `library` fails the equality with plain steps (the reference: the
    built library, backend c stepping the chosen candidate) or the one-history read."""
    bad = runtime.load(art, backend="c", library=library)
    if not _peek_equals_plain_steps(bad, runtime.load(art, backend="c"), 12, seed=9):
        return True
    return not _reads_row_0_only(bad)


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_mutants_of_the_candidate_entry_are_caught(mutant, request, tmp_path, compiler):
    which, old, new = MUTANTS[mutant]
    art = request.getfixturevalue(which)
    good = runtime.load(art, backend="c").backend.library_path
    assert not _caught(art, good)
    assert _caught(art, _mutant_library(art, tmp_path, compiler, old, new))
