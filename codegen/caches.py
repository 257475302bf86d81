"""The first of the generator's two hooks: how past keys are kept (the cache kind); the second,
what one layer computes, is codegen/blocks.py. `codegen/source.py` asks them for C text and never
looks inside.

A cache kind supplies the committed state's members, the attention kernels over that state
(which rows are live at position pos: the selection), the commit (which row position pos is
written to), tf_step's advance, the reset, the tf_layout fields (the runtime reads them:
runtime/backends/c.py LAYOUTS, by block kind) and the positions tf_stage refuses.

Implemented: "static" (max_len rows, row = position), "ring" (a sliding window of W rows,
docs/streaming.md) and "state" (the ssm block's double-buffered state, docs/ssm.md).
docs/codegen.md, section "Extending the generator", says what a new kind supplies.

Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tickformer.contracts import ring_buffer
from tickformer.errors import ArtifactError
from tickformer.model import names
from tickformer.runtime.backends.c import LAYOUTS

from . import kernels
from .plan import Plan


@dataclass(frozen=True)
class Weight:
    """One emitted constant array: C name, values (float32, emitted flat in C order), comment."""

    name: str
    values: np.ndarray
    comment: str


def copy_staged_c(source: str) -> str:
    """The commit's copy (the attention kinds): the staged k, v of batch row `source` (a C int
    expression over l, b, hd, d) into cache row `row` of every layer l and batch row b. tf_commit
    passes "b" (each batch row its own); tf_commit_candidate (codegen/peek.py) passes "i" (the
    chosen candidate's rows into every batch row, which stay one history)."""
    return f"""\
    for (l = 0; l < TF_LAYERS; l++) {{
        for (b = 0; b < TF_BATCH; b++) {{
            for (hd = 0; hd < TF_HEADS; hd++) {{
                for (d = 0; d < TF_D_HEAD; d++) {{
                    s->k[l][b][hd][d][row] = s->k_new[l][{source}][hd][d];
                    s->v[l][b][row][hd][d] = s->v_new[l][{source}][hd][d];
                }}
            }}
        }}
    }}"""


class StaticCache:
    """N = max_len rows; row p holds position p; at position pos rows j >= pos are stale and
    selected out (keys to -inf, values to +0). Reset only sets the position to 0; tf_step
    refuses a full context (TF_E_FULL)."""

    name = "static"

    def rows(self, plan: Plan) -> int:
        return plan.config.max_len

    def state_members(self, plan: Plan) -> list[str]:
        return [
            "float k[TF_LAYERS][TF_BATCH][TF_HEADS][TF_D_HEAD][TF_ROWS]; /* committed keys, transposed: "
            "column j = cache row j */",
            "float v[TF_LAYERS][TF_BATCH][TF_ROWS][TF_HEADS][TF_D_HEAD]; /* committed values: row j, "
            "heads side by side */",
            "float k_new[TF_LAYERS][TF_BATCH][TF_HEADS][TF_D_HEAD]; /* staged by tf_stage, written by tf_commit */",
            "float v_new[TF_LAYERS][TF_BATCH][TF_HEADS][TF_D_HEAD];",
        ]

    def weights(self, plan: Plan) -> list[Weight]:
        return []

    def tables(self, plan: Plan) -> str:
        return ""

    def kernels(self, plan: Plan) -> list[str]:
        rows = self.rows(plan)
        return [
            kernels.values_c(rows, plan.heads, plan.dh),
            kernels.attention_c(rows, plan.heads, plan.dh),
        ]

    def attention_args(self, plan: Plan) -> str:
        """Extra arguments of the tf_attention call in layer l (before `pos`)."""
        return ""

    def selection(self, plan: Plan) -> tuple[Any, str, int | None, int]:
        """For kernels generated outside this class (codegen/peek.py): the C predicate of a live
        row, the setup line it needs, and the bias row pitch and own-key column (None, 0: no
        relative-position bias) -- what `kernels` passes to kernels.attention_c."""
        return kernels.static_live, "", None, 0

    def matvecs(self, plan: Plan) -> set[tuple[int, int, bool]]:
        return {(plan.dh, self.rows(plan), False)}  # one head's scores

    def sums(self, plan: Plan) -> set[int]:
        return {self.rows(plan)}

    def commit_row(self, plan: Plan) -> str:
        """C expression: the cache row the staged rows of `pos` go to (pos already checked)."""
        return "pos"

    def position_refused(self, plan: Plan) -> str:
        """C condition on `pos` under which tf_stage refuses it (TF_E_POSITION)."""
        return "pos < 0 || pos >= TF_POSITIONS"

    layout = LAYOUTS["attention"]  # tf_layout(i): 0 sizeof, then byte offsets (the runtime reads them)

    def commit_c(self, plan: Plan) -> str:
        return f"""\
    int l, b, hd, d;
    int32_t row;
    if (pos < 0 || pos >= TF_POSITIONS) {{
        return; /* tf_stage refused this position; nothing was staged for it */
    }}
    row = {self.commit_row(plan)};
{copy_staged_c("b")}
"""

    def step_c(self, plan: Plan) -> str:
        """The body of tf_step: refuse a full context, stage, commit, advance."""
        return """\
    int status;
    if (s->pos >= TF_MAX_LEN) {
        return TF_E_FULL;
    }
    status = tf_stage(s, x, s->pos, y);
    if (status != TF_OK) {
        return status;
    }
    tf_commit(s, s->pos);
    s->pos = s->pos + 1;
    return TF_OK;
"""

    def reset_c(self, plan: Plan) -> str:
        return "    /* nothing to clear: rows not written since the reset are selected out by position */\n"


@dataclass(frozen=True)
class RingTables:
    """What the ring cache's C code looks up per ring position r in [0, 3W) -- every entry made
    by calling contracts.ring_buffer (`ring_tables`), and checked there against it:

    lim, excl    slot j is read at r iff j < lim[r] and j != excl[r]   (slot_read, R7)
    boff         the scores' bias row at r is unrolled[boff[r] : boff[r] + W]   (window_distance, R5)
    slot         the row the commit at r writes   (ring_slot, R1)
    nxt          the ring position after r   (next_ring_position, R11)
    unrolled     [2W - 1] distances: unrolled[i] = window_distance(W - 1, i, W); a head's bias
                 table is emitted in this order, so the step reads each bias row contiguously
    own          the column of the own key's distance (window_distance(r, ring_slot(r), W) = 0)
    """

    window: int
    lim: tuple[int, ...]
    excl: tuple[int, ...]
    boff: tuple[int, ...]
    slot: tuple[int, ...]
    nxt: tuple[int, ...]
    unrolled: tuple[int, ...]
    own: int


def ring_tables(window: int) -> RingTables:
    """The ring cache's lookup tables for window W (RingTables), derived from the contract
    functions the runtime calls and checked against them exhaustively: for every ring position
    r in [0, 3W) and every slot j, (j < lim[r] and j != excl[r]) == slot_read(r, j, W) and
    unrolled[boff[r] + j] == window_distance(r, j, W). A contract whose selection these two
    forms cannot express is refused (ArtifactError), never approximated. Not real-time."""
    w = window
    unrolled = tuple(int(ring_buffer.window_distance(w - 1, i, w)) for i in range(2 * w - 1))
    lim, excl, boff, slot, nxt = [], [], [], [], []
    own = set()
    for r in range(3 * w):
        live = [bool(ring_buffer.slot_read(r, j, w)) for j in range(w)]
        top = max((j + 1 for j in range(w) if live[j]), default=0)
        holes = [j for j in range(top) if not live[j]]
        hole = holes[0] if len(holes) == 1 else -1
        if len(holes) > 1 or [(j < top and j != hole) for j in range(w)] != live:
            raise ArtifactError(
                f"contracts.ring_buffer.slot_read at ring position {r} (window {w}) reads slots "
                f"{[j for j in range(w) if live[j]]}, which codegen's ring selection (j < lim, j != excl) "
                "cannot express; use backend 'ort' or 'numpy' for this artifact"
            )
        dist = [int(ring_buffer.window_distance(r, j, w)) for j in range(w)]
        starts = [o for o in range(w) if list(unrolled[o : o + w]) == dist]
        if not starts:
            raise ArtifactError(
                f"contracts.ring_buffer.window_distance at ring position {r} (window {w}) gives distances "
                f"{dist}, which are not a contiguous run of codegen's unrolled bias table; use backend 'ort' "
                "or 'numpy' for this artifact"
            )
        lim.append(top)
        excl.append(hole)
        boff.append(starts[0])
        slot.append(int(ring_buffer.ring_slot(r, w)))
        nxt.append(int(ring_buffer.next_ring_position(r, w)))
        own.add(unrolled.index(int(ring_buffer.window_distance(r, slot[-1], w))))
    if len(own) != 1:
        raise ArtifactError(f"the own key's bias column varies with the ring position (window {w}): {own}")
    return RingTables(w, tuple(lim), tuple(excl), tuple(boff), tuple(slot), tuple(nxt), unrolled, own.pop())


def ring_tables_c(t: RingTables) -> str:
    """The tables as `static const int32_t` C arrays (tf_ring_lim, _excl, _boff, _slot, _next)."""

    def table(name: str, values: tuple[int, ...], comment: str) -> str:
        body = ", ".join(str(v) for v in values)
        return f"/* {comment} */\nstatic const int32_t {name}[{len(values)}] = {{{body}}};\n"

    return "\n".join(
        [
            f"/* ---- ring cache tables, one entry per ring position r in [0, {3 * t.window}): made by calling "
            "contracts.ring_buffer and checked against it for every r and slot (codegen/caches.py ring_tables) ---- */",
            table(
                "tf_ring_lim",
                t.lim,
                "slot j is read at r iff j < tf_ring_lim[r] && j != tf_ring_excl[r] (slot_read)",
            ),
            table(
                "tf_ring_excl",
                t.excl,
                "the one slot below tf_ring_lim[r] not read: it holds position r - W (-1: none)",
            ),
            table(
                "tf_ring_boff",
                t.boff,
                "bias row of r: tf_rel_bias[l][h][boff[r] + j] = rel_bias[h, window_distance(r, j, W)]",
            ),
            table("tf_ring_slot", t.slot, "the slot the commit at r writes (ring_slot)"),
            table("tf_ring_next", t.nxt, "the ring position after r (next_ring_position)"),
        ]
    )


class RingCache(StaticCache):
    """A sliding window of W rows (docs/streaming.md): tf_stage's `pos` is the ring position r in
    [0, 3W) (contracts.ring_buffer.ring_position; the Session hands the same to every backend);
    the step reads the slots slot_read(r, j, W) selects, adds the learned relative-position bias
    rel_bias[h, window_distance(r, j, W)] to their scores before the selection (model/attention.py),
    commits to ring_slot(r, W), and tf_step walks next_ring_position: a stream never fills, so there
    is no TF_E_FULL, and the position stored never grows past 3W. Reset only sets the position to 0:
    at r < W only slots j < r are read (R7), so nothing written before the reset is. The tables are
    `ring_tables(W)`, emitted as `static const int32_t` arrays."""

    name = "ring"

    def rows(self, plan: Plan) -> int:
        assert plan.window is not None
        return plan.window

    def _tables(self, plan: Plan) -> RingTables:
        assert plan.window is not None
        return ring_tables(plan.window)

    def weights(self, plan: Plan) -> list[Weight]:
        """tf_rel_bias [L][H][2W - 1]: layer l's rel_bias [H, W] gathered at the unrolled distances,
        so the bias of ring position r's scores is the contiguous row [boff[r], boff[r] + W)."""
        t, cfg = self._tables(plan), plan.config
        layers = names.decoder_layers(cfg)
        tables = []
        for layer in layers:
            assert layer.self_attn_position is not None  # windowed configs have the bias group
            table = plan.param(layer.self_attn_position["rel_bias"], (plan.heads, t.window))  # [H, W]
            tables.append(table[:, list(t.unrolled)])  # [H, 2W - 1]
        return [
            Weight(
                "tf_rel_bias",
                np.stack(tables),
                "dec.i.self_attn.rel_bias [H, W] at the distances window_distance(W - 1, i, W), i < 2W - 1",
            )
        ]

    def tables(self, plan: Plan) -> str:
        return ring_tables_c(self._tables(plan))

    def kernels(self, plan: Plan) -> list[str]:
        rows, t = self.rows(plan), self._tables(plan)
        setup = kernels.RING_SETUP + " const int32_t boff = tf_ring_boff[pos];"
        return [
            kernels.values_c(rows, plan.heads, plan.dh, kernels.ring_live, kernels.RING_SETUP),
            kernels.attention_c(
                rows,
                plan.heads,
                plan.dh,
                kernels.ring_live,
                setup,
                bias_pitch=len(t.unrolled),
                bias_own=t.own,
            ),
        ]

    def attention_args(self, plan: Plan) -> str:
        pitch = plan.heads * len(self._tables(plan).unrolled)
        return f"tf_rel_bias + l * {pitch}, "

    def selection(self, plan: Plan) -> tuple[Any, str, int | None, int]:
        t = self._tables(plan)
        setup = kernels.RING_SETUP + " const int32_t boff = tf_ring_boff[pos];"
        return kernels.ring_live, setup, len(t.unrolled), t.own

    def commit_row(self, plan: Plan) -> str:
        return "tf_ring_slot[pos]"

    def step_c(self, plan: Plan) -> str:
        return """\
    int status;
    if (s->pos < 0 || s->pos >= TF_POSITIONS) {
        return TF_E_POSITION; /* a corrupted stored ring position (tf_stage refuses it too; stated here so a
                                 checker sees the table index below is in range) */
    }
    status = tf_stage(s, x, s->pos, y);
    if (status != TF_OK) {
        return status;
    }
    tf_commit(s, s->pos);
    s->pos = tf_ring_next[s->pos]; /* slides: never full */
    return TF_OK;
"""

    def reset_c(self, plan: Plan) -> str:
        return "    /* nothing to clear: at ring position r < W only slots j < r are read (slot_read) */\n"


class StateCache(StaticCache):
    """The state-space block's recurrent state (artifact kind "ssm", docs/ssm.md): no KV cache; the
    whole state [B, L, D, N] twice, `state[2]` (double buffering as runtime/backends/ssm.py): the
    step at position pos reads buffer pos & 1 and writes buffer 1 - (pos & 1), so a refused step
    leaves the state it read untouched and the commit is the position store alone (tf_commit has
    nothing to copy). tf_stage takes any pos >= 0 (the session's position: only its parity
    matters); tf_step keeps s->pos in {0, 1}. Reset zeroes buffer 0 (bounded work: the state's
    size, L B D N floats) and sets pos to 0."""

    name = "state"
    layout = LAYOUTS["ssm"]

    def rows(self, plan: Plan) -> int:
        return 0

    def position_refused(self, plan: Plan) -> str:
        return "pos < 0"

    def state_members(self, plan: Plan) -> list[str]:
        return [
            "float state[2][TF_BATCH][TF_LAYERS][TF_D_MODEL][TF_D_STATE]; /* buffer pos & 1 read, the other "
            "written */",
        ]

    def kernels(self, plan: Plan) -> list[str]:
        return []

    def matvecs(self, plan: Plan) -> set[tuple[int, int, bool]]:
        return set()

    def sums(self, plan: Plan) -> set[int]:
        return set()

    def commit_c(self, plan: Plan) -> str:
        return """\
    (void)s;
    (void)pos; /* the step wrote buffer 1 - (pos & 1); advancing the position commits it */
"""

    def step_c(self, plan: Plan) -> str:
        return """\
    int status;
    status = tf_stage(s, x, s->pos, y); /* refuses a negative stored position: a corrupted state */
    if (status != TF_OK) {
        return status;
    }
    s->pos = (s->pos & 1) ^ 1; /* the commit: the buffer just written is read next */
    return TF_OK;
"""

    def reset_c(self, plan: Plan) -> str:
        return """\
    {
        int b, l, d, n;
        for (b = 0; b < TF_BATCH; b++) {
            for (l = 0; l < TF_LAYERS; l++) {
                for (d = 0; d < TF_D_MODEL; d++) {
                    for (n = 0; n < TF_D_STATE; n++) {
                        s->state[0][b][l][d][n] = 0.0f; /* the buffer position 0 reads */
                    }
                }
            }
        }
    }
"""


CACHE_KINDS = {"static": StaticCache(), "ring": RingCache(), "state": StateCache()}
