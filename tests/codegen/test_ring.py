"""The ring cache kind (windowed artifacts): its tables come from contracts.ring_buffer and the
generator refuses a selection it cannot express; the generated step differs from the static one
where it must (no positional table, the relative-position bias, no full context); and the
golden check of `make check` catches the mistakes a ring cache invites (a missing bias, a read
of the slot that holds the evicted position, positions that do not wrap).
"""

from __future__ import annotations

import re

import pytest
from _cgutil import run_make

from tickformer.codegen import caches, generate, plan_for, write
from tickformer.contracts import ring_buffer
from tickformer.errors import ArtifactError
from tickformer.runtime import open_artifact


@pytest.mark.parametrize("window", [1, 2, 3, 4, 5, 8, 13, 16, 32])
def test_ring_tables_are_the_contract_functions(window):
    """Exhaustive for these windows: every ring position r in [0, 3W) and slot j."""
    t = caches.ring_tables(window)
    for r in range(3 * window):
        for j in range(window):
            assert ((j < t.lim[r]) and (j != t.excl[r])) == bool(ring_buffer.slot_read(r, j, window))
            assert t.unrolled[t.boff[r] + j] == ring_buffer.window_distance(r, j, window)
        assert t.slot[r] == ring_buffer.ring_slot(r, window)
        assert t.nxt[r] == ring_buffer.next_ring_position(r, window)
        assert t.unrolled[t.own] == ring_buffer.window_distance(r, t.slot[r], window) == 0


def test_a_selection_the_tables_cannot_express_is_refused(monkeypatch):
    """The wrong twin: a slot_read with two holes below its top slot is refused by name, never
    approximated."""
    monkeypatch.setattr(ring_buffer, "slot_read", lambda r, j, w: j % 2 == 0)
    with pytest.raises(ArtifactError, match=r"slot_read at ring position \d+ \(window 6\).*cannot express"):
        caches.ring_tables(6)


def test_windowed_plan(arts):
    art = open_artifact(arts["win4"])
    plan = plan_for(art)
    assert (plan.cache_kind, plan.rows, plan.positions) == ("ring", 4, 12)


def test_windowed_source_differs_where_it_must(arts):
    files = generate(arts["win4"])
    src, head = files["tf_model.c"].decode(), files["tf_model.h"].decode()
    code = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    assert re.search(r"\btf_pe\b", code) is None  # no absolute positions (tf_peek is the candidate entry)
    assert "static const float tf_rel_bias[" in code  # [L][H][2W - 1]
    assert "TF_E_FULL" not in code.split("int tf_step(")[1]  # slides, never full
    assert "#define TF_POSITIONS 12" in head and "#define TF_RING 1" in head
    golden = files["tf_golden.h"].decode()
    assert "#define TF_GOLDEN_FIRST 17" in golden  # max(max_len 16, 4W + 1)
    assert "#define TF_GOLDEN_STEPS 26" in golden  # + 2W + 1 after the reset


MUTANTS = {
    "bias dropped": (r"sh\[j\] \+ bh\[j\]", "sh[j] + 0.0f * bh[j]"),
    "own bias dropped": (r"s_own = s_own \+ bias\[", "s_own = s_own + 0.0f * bias["),
    "reads the evicted slot": (r"\(j != excl\)", "(j != excl - 100)"),
    "ring does not wrap": (
        r"s->pos = tf_ring_next\[s->pos\];",
        "s->pos = s->pos + 1 < TF_POSITIONS ? s->pos + 1 : 0;",
    ),
}


@pytest.mark.parametrize("mutant", sorted(MUTANTS))
def test_golden_check_catches_ring_mutants(arts, mutant, tmp_path, c_compiler, make_tool):
    out = write(arts["win4"], tmp_path / "c")
    pattern, replacement = MUTANTS[mutant]
    src = (out / "tf_model.c").read_text()
    mutated, count = re.subn(pattern, replacement, src)
    assert count >= 1, mutant
    (out / "tf_model.c").write_text(mutated)
    done = run_make(
        out, "check", make_tool, c_compiler, "STRICT=-std=c99"
    )  # a mutant may leave a table unused
    assert done.returncode != 0, (mutant, done.stdout[-2000:])
    assert "FAIL golden" in done.stdout or "FAIL stale rows" in done.stdout, done.stdout[-2000:]
