"""The slot pool: every served stream's state in arrays allocated once, one slot per stream, and
one batched step over any set of slots, each at its own position.

A runtime Session steps the B rows of a batch-B artifact at ONE shared position (step.onnx has a
single `pos` input). Streams served by one server start at different times, so the pool keeps a
position per slot and steps them together with the model's own functions (model/layers.py,
model/attention.py, model/ssm.py) -- the arithmetic of the runtime's numpy backend
(runtime/backends/numpy.py), with its position tables indexed by a position array [n] instead
of a scalar:

    static    a KV cache of max_len rows per slot; the step at position p reads rows < p
              (contracts.masking.cache_row_live), adds the positional table's row p and writes
              row p; at max_len the slot is full (`full`): its stream must restart.
    ring      a windowed artifact's W rows per slot: the step reads the slots
              contracts.ring_buffer.slot_read names for the slot's ring position r, biased by the
              relative-position table at window_distance, and writes row r mod W; never full.
              r advances by the successor table next_ring_position, made at load.
    state     an ssm artifact's state [L, D, N] per slot: the step reads it and the commit
              overwrites it; position-free, never full.

Layout (llama2.c's run state, allocated once for `slots` streams):

    k, v      [L, S, H, N, dh] float32   (attention)
    state     [S, L, D, N]     float32   (ssm)
    position  [S] int64                  steps since the slot's stream started
    ring      [S] int64                  graph position: position (static), the ring position
                                         in [0, 3W) (windowed), 0 (ssm)

`step(slots, x)` computes every output first and commits (writes the new rows, advances the
positions) only when all of it succeeded and every new row is finite, so an exception leaves
every slot as it was, and every row the pool holds is finite: a stale row (selected out of the
scores, weight exactly 0) needs no masking of its values. A run of consecutive slots (a
tick-batched group) is read through views of the caches, other sets are gathered. Slots not
named are neither read nor written: one stream's state is never touched by another's step.

Not real-time: a step allocates its temporaries (numpy) and gathers the named slots' caches
(work bounded by n x N rows). A server's execution is not a control tick.
"""

from __future__ import annotations

import numpy as np

from tickformer.artifact import format as fmt
from tickformer.artifact.reader import Artifact
from tickformer.contracts.masking import cache_row_live
from tickformer.contracts.ring_buffer import next_ring_position, slot_read, window_distance
from tickformer.errors import ConfigError
from tickformer.model import (
    layers,  # the model's own layer functions, by module
    names,
)
from tickformer.model.attention import SoftmaxState, chunk_state, finalize, merge, scaled_scores
from tickformer.model.ssm import ssm_step
from tickformer.model.transformer import project_out


def check_servable(artifact: Artifact) -> None:
    """Raise ConfigError unless the artifact is a decoder-only one (attention, windowed or ssm):
    an encoder-decoder decodes bounded sequences from a source, not open-ended streams."""
    if artifact.config.arch != "decoder":
        raise ConfigError(
            f"{artifact.root}: is an {artifact.config.arch} artifact; serving keeps open-ended streams of "
            "decoder-only artifacts (attention, windowed or ssm): export a decoder-only model"
        )


class SlotPool:
    """`slots` streams' state of one artifact, and the batched step over any of them."""

    def __init__(self, artifact: Artifact, slots: int) -> None:
        check_servable(artifact)
        if slots < 1:
            raise ConfigError(f"slots={slots}: a pool holds at least 1 stream; pass --slots 1 or more")
        cfg = self.config = artifact.config
        self.slots = slots
        self.params = artifact.params()
        self.block = cfg.block
        self.position = np.zeros(slots, np.int64)  # [S]
        self.ring = np.zeros(slots, np.int64)  # [S]
        self.window = cfg.window
        self.max_len = cfg.max_len
        self.out_width = fmt.out_width(cfg)
        self.domain = artifact.input_domain  # (lo, hi): the inputs the artifact was exported for
        self.domain_columns = artifact.input_domain_columns  # per input column (lows, highs), or None
        self._pe: np.ndarray | None = None  # [N, D]: attention without a window only
        self._bias: list[np.ndarray] = []  # windowed: per layer [3W, H, 1, W]
        if cfg.block == "ssm":
            self.state = np.zeros((slots, cfg.n_layers, cfg.d_model, cfg.d_state), np.float32)  # [S, L, D, N]
            self._layers = [self._ssm_layer(groups) for groups in names.ssm_layers(cfg)]
            return
        n_rows = cfg.max_len if cfg.window is None else cfg.window
        shape = (cfg.n_layers, slots, cfg.n_heads, n_rows, cfg.d_head)
        self.k = np.zeros(shape, np.float32)  # [L, S, H, N, dh]
        self.v = np.zeros(shape, np.float32)  # [L, S, H, N, dh]
        if cfg.window is None:
            self._pe = layers.positional_encoding(cfg.max_len, cfg.d_model)  # [N, D]
            rows = np.arange(cfg.max_len)
            self._live = cache_row_live(rows[None, :], rows[:, None])  # [N, N]: rows read at position p
            self._next = np.minimum(rows + 1, cfg.max_len)  # static: p + 1 (full at max_len)
        else:
            w = cfg.window
            rings, ring_slots = np.arange(3 * w)[:, None], np.arange(w)[None, :]  # [3W, 1], [1, W]
            self._live = slot_read(rings, ring_slots, w)  # [3W, W]: the slots the step at r reads
            distance = window_distance(rings, ring_slots, w)  # [3W, W]
            self._next = np.array([next_ring_position(r, w) for r in range(3 * w)], np.int64)  # [3W]
            for layer in names.decoder_layers(cfg):
                assert layer.self_attn_position is not None  # windowed configs have the bias group
                table = self.params[layer.self_attn_position["rel_bias"]]  # [H, W]
                self._bias.append(np.ascontiguousarray(table[:, distance].transpose(1, 0, 2)[:, :, None, :]))
        self._layers = [self._attn_layer(layer) for layer in names.decoder_layers(cfg)]

    def _ssm_layer(self, groups: tuple[names.Group, ...]) -> dict:
        mixer, mixer_norm, ffn, ffn_norm = (group.take(self.params) for group in groups)
        return {"mixer": mixer, "ffn": ffn, "ln": [mixer_norm, ffn_norm]}

    def _attn_layer(self, layer: names.Layer) -> dict:
        norms = (layer.self_attn_norm, layer.ffn_norm)
        return {
            "mixer": layer.self_attn.take(self.params),
            "ffn": layer.ffn.take(self.params),
            "ln": [norm.take(self.params) for norm in norms if norm is not None],
        }

    # --- the pool's bookkeeping ----------------------------------------------------------------
    def reset(self, slots: np.ndarray) -> None:
        """Start new streams in `slots` [n]: position 0 (stale cache rows are never read: the
        step selects rows by position), an ssm state zeroed."""
        self.position[slots] = 0
        self.ring[slots] = 0
        if self.block == "ssm":
            self.state[slots] = 0.0

    def full(self, slots: np.ndarray) -> np.ndarray:
        """[n] bool: the slots whose static cache is full (position max_len); never for ring/ssm."""
        if self.block == "ssm" or self.window is not None:
            return np.zeros(len(slots), bool)
        return self.position[slots] >= self.max_len

    # --- the step ------------------------------------------------------------------------------
    def step(self, slots: np.ndarray, x: np.ndarray) -> np.ndarray:
        """One position for each of `slots` [n] (distinct; none full), x [n, d_in] float32
        (tokens [n] int64) -> y [n, d_out] (logits [n, V]); commits only after every output is
        computed. Not real-time (module docstring)."""
        cfg = self.config
        # a run of consecutive slots (a tick-batched group, a full pool) is read through views,
        # not gathered: the same values, without copying every cache
        first = int(slots[0]) if len(slots) else 0
        run = (
            len(slots) > 0 and int(slots[-1]) - first + 1 == len(slots) and bool(np.all(np.diff(slots) == 1))
        )
        # a run's slots are distinct; any other set is checked (a sort): the model groups requests
        # by slot, so a slot named twice is a bug there, refused before anything is computed
        if not run and len(np.unique(slots)) != len(slots):
            raise ValueError("a slot appears twice in one step")
        sel = slice(first, first + len(slots)) if run else slots
        if cfg.inputs == "tokens":
            h = self.params[names.TOK_EMBED][x][:, None, :] * np.float32(np.sqrt(cfg.d_model))  # [n, 1, D]
        else:
            h = layers.linear(x[:, None, :], **names.IN_PROJ.take(self.params))  # [n, 1, D]
        r = self.ring[slots]  # [n]
        if self._pe is not None:
            h = h + self._pe[r][:, None, :]  # [n, 1, D]
        staged = []
        for i, w in enumerate(self._layers):
            mixed, new = self._mix(h, i, sel, r)
            staged.append(new)
            h = layers.layer_norm(h + mixed, **w["ln"][0], eps=cfg.ln_eps)
            h = layers.layer_norm(
                h + layers.feed_forward(h, **w["ffn"]), **w["ln"][-1], eps=cfg.ln_eps
            )  # [n, 1, D]
        y = project_out(self.params, cfg, h)[:, 0]  # [n, out]
        self._commit(slots, r, staged)
        return y

    def _mix(
        self, h: np.ndarray, layer: int, slots: np.ndarray | slice, r: np.ndarray
    ) -> tuple[np.ndarray, tuple]:
        """The layer's mixer on h [n, 1, D] -> ([n, 1, D], what the commit writes); `slots` an
        index array or the slice of a run of consecutive slots."""
        if self.block == "ssm":
            out, new = ssm_step(h[:, 0], self.state[slots, layer], **self._layers[layer]["mixer"])
            return out[:, None], (new,)  # [n, 1, D], ([n, D, N],)
        w, nh = self._layers[layer]["mixer"], self.config.n_heads
        q = layers.split_heads(layers.linear(h, w=w["w_q"], b=w["b_q"]), nh)  # [n, H, 1, dh]
        k = layers.split_heads(layers.linear(h, w=w["w_k"], b=w["b_k"]), nh)  # [n, H, 1, dh]
        v = layers.split_heads(layers.linear(h, w=w["w_v"], b=w["b_v"]), nh)  # [n, H, 1, dh]
        s = scaled_scores(q, self.k[layer, slots])  # [n, H, 1, N]
        s_own = scaled_scores(q, k)[..., 0]  # [n, H, 1]
        if self._bias:
            s += self._bias[layer][r]  # [n, H, 1, W]
            s_own += self._bias[layer][0, :, :, 0]  # [H, 1]: distance 0
        live = self._live[r]  # [n, N]
        # stale rows get weight exactly 0 (selected out of the scores); their values need no
        # masking because every row the pool holds is finite (zeros, or written by a commit,
        # which refuses non-finite rows), so 0 * value is 0
        piece = chunk_state(s, live[:, None, None, :], self.v[layer, slots])  # v [n, H, N, dh]
        own = SoftmaxState(m=s_own, l=np.ones(q.shape[:-1], np.float32), acc=v)  # exp(s - s) = 1
        heads = finalize(merge(piece, own))  # [n, H, 1, dh]
        return layers.linear(layers.merge_heads(heads), w=w["w_o"], b=w["b_o"]), (k, v)

    def _commit(self, slots: np.ndarray, r: np.ndarray, staged: list[tuple]) -> None:
        if not all(np.isfinite(a).all() for new in staged for a in new):
            raise FloatingPointError("the step produced a non-finite state row; no stream advanced")
        if self.block == "ssm":
            for layer, (new,) in enumerate(staged):
                self.state[slots, layer] = new  # [n, D, N]
        else:
            row = r if self.window is None else r % self.window  # [n]
            for layer, (k, v) in enumerate(staged):
                self.k[layer, slots, :, row] = k[:, :, 0, :]  # [n, H, dh]
                self.v[layer, slots, :, row] = v[:, :, 0, :]
            self.ring[slots] = self._next[r]
        self.position[slots] += 1
