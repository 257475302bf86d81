"""The candidate entry in the generated text (codegen/peek.py): tf_peek and tf_commit_candidate
are emitted for the attention kinds only, and tf_test's candidate check (codegen/testprog.py,
check 5: tf_peek + tf_commit_candidate bitwise tf_stage + tf_commit at every golden step, the
whole committed cache compared) passes on the static and the ring cache and fails on planted
mutants of the text -- the check can fail. The Session-level tests are tests/runtime/test_peek.py
and test_c_peek.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from _cgutil import run_make

from tickformer.codegen import generate, write
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset

K = 3


def _export(tmp_path_factory, config, name, seed, **kwargs):
    out = tmp_path_factory.mktemp(name) / "art"
    params = init_params(config, seed)
    rng = np.random.default_rng(seed)
    for key in params:  # a trained-looking bias (the init's distance-0 column is 0)
        if key.endswith(".rel_bias"):
            params[key] = (params[key] + rng.normal(0.0, 0.5, params[key].shape)).astype(np.float32)
    export_params(config, params, out, **kwargs)
    return out


@pytest.fixture(scope="module")
def peek_arts(tmp_path_factory):
    tiny = preset("tiny")
    tokens = tiny.replace(inputs="tokens", d_in=0, d_out=0, vocab_size=11, window=5)
    return {
        "static": _export(tmp_path_factory, tiny, "pstatic", 31, batch=K),
        "ring": _export(tmp_path_factory, tiny.replace(window=4), "pring", 32, batch=K),
        "ringtokens": _export(tmp_path_factory, tokens, "pringtokens", 33, batch=2),
        "ssm": _export(tmp_path_factory, tiny.replace(block="ssm", d_state=4), "pssm", 34, batch=K),
    }


def test_the_candidate_entry_is_emitted_for_attention_only(peek_arts):
    for name in ("static", "ring", "ringtokens"):
        files = generate(peek_arts[name])
        assert "int tf_peek(" in files["tf_model.h"].decode()
        assert "int tf_commit_candidate(" in files["tf_model.c"].decode()
    files = generate(peek_arts["ssm"])
    assert "tf_peek" not in files["tf_model.h"].decode() + files["tf_model.c"].decode()


@pytest.mark.parametrize("name", ["static", "ring", "ringtokens"])
def test_tf_test_checks_the_candidates(peek_arts, name, tmp_path, c_compiler, make_tool):
    out = write(peek_arts[name], tmp_path / name)
    done = run_make(out, "check", make_tool, c_compiler)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-3000:]
    assert "candidates: tf_peek + tf_commit_candidate bitwise tf_stage + tf_commit" in log, log
    assert "tf_test: all checks passed" in log


def _values(u: int) -> str:
    return f"x{u} * tf_and_bits(w{u}[o], m{u})"


# name -> (artifact, text in tf_model.c (its LAST occurrence: the candidate entry comes after the
# step), replacement, what tf_test must say)
MUTANTS = {
    # the values' pass adds two unrolled rows in the other order (the sum rounds differently)
    "values order": (
        "static",
        f"(((yh[o] + {_values(0)}) + {_values(1)})",
        f"(((yh[o] + {_values(1)}) + {_values(0)})",
        "tf_peek differs from tf_stage",
    ),
    # candidate i's rows committed into its own batch row only
    "commit one row": (
        "static",
        "s->k[l][b][hd][d][row] = s->k_new[l][i][hd][d];",
        "s->k[l][i][hd][d][row] = s->k_new[l][i][hd][d];",
        "tf_commit_candidate: cache differs",
    ),
    # the ring's own-key bias dropped in the candidate attention
    "own bias": (
        "ring",
        "            s_own = s_own + bias[",
        "            s_own = s_own + 0.0f * bias[",
        "tf_peek differs from tf_stage",
    ),
    # the commit writes the ring slot of the next position
    "ring slot": (
        "ring",
        "    row = tf_ring_slot[pos];",
        "    row = tf_ring_slot[tf_ring_next[pos]];",
        "tf_commit_candidate: cache differs",
    ),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_tf_test_catches_mutants_of_the_candidate_entry(mutant, peek_arts, tmp_path, c_compiler, make_tool):
    which, old, new, message = MUTANTS[mutant]
    out = write(peek_arts[which], tmp_path / "c")
    text = (out / "tf_model.c").read_text()
    assert old in text, old
    head, _, tail = text.rpartition(old)
    (out / "tf_model.c").write_text(head + new + tail)
    done = run_make(out, "check", make_tool, c_compiler)
    assert done.returncode != 0 and message in done.stdout, (done.stdout + done.stderr)[-3000:]
