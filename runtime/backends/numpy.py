"""numpy backend: runs an artifact from `weights.npz` + `manifest.json` alone, no ONNX.

Both block kinds (base.py): a step embeds x, then per layer runs its mixer -- self-attention
over the KV cache (attention), or `model.ssm.ssm_step` over the double-buffered state (ssm:
reads state(pos), writes staged_state(pos)) -- and the feed-forward, each in the post-LN residual
stack, then projects out; the state lives in the store of its kind (layout.HostCache /
HostState), which also commits. Two variants, named so nobody mistakes one for the other:

    numpy          static cache: every step attends over all max_len rows, stale ones selected
                   out with where(j < pos, s, -inf) -- the same work at every position, like
                   step.onnx (the measured latency is the worst case).
    numpy-growing  growing cache: a step attends over rows 0..pos only -- cheaper early in a
                   sequence, cost grows linearly with the position (sum over n steps: O(n^2)).
                   Not constant time; use it offline, not in a control loop. Attention only.

Both compute with the model's own functions (model/layers.py) and the one online-softmax
operator (model/attention.py: chunk_state over the cache, the new key as a second piece, merge,
finalize). Real-time: after the first step, `step` allocates only numpy temporaries that are
freed before it returns (zero net blocks; tests/runtime/test_allocation.py) -- by design, ~21 KB
per step at the `control` preset (benchmarks/ANALYSIS.md section 3): allocation-free would need
`out=` buffers throughout the model functions. `commit` allocates 0 bytes (`layout.HostCache`,
the same cache layout as the ORT backend). Work is bounded by max_len (static) or pos (growing);
an ssm step is the same work at every position. Windowed artifacts (static variant only): a
ring cache of W rows, slots selected by contracts.ring_buffer.slot_read and biased by
rel_bias[:, window_distance] -- both tables made at load for every ring position r in [0, 3W) by
calling the contract functions on index arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tickformer.artifact import format as fmt
from tickformer.artifact.reader import Artifact
from tickformer.contracts.masking import cache_row_live
from tickformer.contracts.ring_buffer import slot_read, window_distance
from tickformer.model import names
from tickformer.model.attention import (
    SoftmaxState,
    attention,
    chunk_state,
    empty_state,
    finalize,
    merge,
    scaled_scores,
)
from tickformer.model.layers import (
    feed_forward,
    layer_norm,
    linear,
    merge_heads,
    positional_encoding,
    split_heads,
)
from tickformer.model.ssm import ssm_step
from tickformer.model.transformer import encode, forward, project_out

from .layout import HostBackend


class NumpyBackend(HostBackend):
    """Static-cache numpy backend (constant work per step), both block kinds."""

    name = "numpy"
    static_cache = True
    ring_cache = True

    def __init__(self, artifact: Artifact, **options: Any) -> None:
        super().__init__(artifact, **options)
        cfg = self.config
        self.params = artifact.params()
        self.store = self._host_store()
        self._y = np.zeros(self.step_output_shape, dtype=np.float32)  # [B, 1, d_out | V]
        self._cross: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._pe: np.ndarray | None = None  # [N, D]: attention without a window only
        if self.block == "ssm":
            self._layers = [self._ssm_layer_weights(groups) for groups in names.ssm_layers(cfg)]
            views = [self.store.views(parity) for parity in (0, 1)]
            self._rw = [(v[fmt.SSM_STATE], v[fmt.SSM_STATE_NEW]) for v in views]  # [parity]: (read, written)
            return
        if cfg.window is None:
            self._pe = positional_encoding(cfg.max_len, cfg.d_model)  # [N, D]
        rows = np.arange(cfg.max_len)  # [N]
        self._live = cache_row_live(rows[None, :], rows[:, None])  # [N, N]: row pos = rows read at pos (M7)
        self._bias: list[np.ndarray] = []  # windowed: per layer [3W, H, 1, W] score terms by ring position
        if cfg.window is not None:
            w = cfg.window
            rings, slots = np.arange(3 * w)[:, None], np.arange(w)[None, :]  # [3W, 1], [1, W]
            self._live = slot_read(rings, slots, w)  # [3W, W]: the slots the step at r reads (R7)
            distance = window_distance(rings, slots, w)  # [3W, W]: their distances (R5)
            for layer in names.decoder_layers(cfg):
                assert layer.self_attn_position is not None  # windowed configs have the bias group
                table = self.params[layer.self_attn_position["rel_bias"]]  # [H, W]
                self._bias.append(np.ascontiguousarray(table[:, distance].transpose(1, 0, 2)[:, :, None, :]))
        self._layers = [self._layer_weights(i) for i in range(cfg.n_layers)]
        host = self.store  # layout.HostCache: the ORT backend's layout
        self._k, self._v = host.k, host.v  # [L, B, H, N, dh] (K a view of its transposed store)
        self._k_new, self._v_new = host.k_new, host.v_new  # [L, B, H, 1, dh]

    def _ssm_layer_weights(self, groups: tuple[names.Group, ...]) -> dict[str, Any]:
        mixer, mixer_norm, ffn, ffn_norm = (group.take(self.params) for group in groups)
        return {"mixer": mixer, "cross": None, "ffn": ffn, "ln": [mixer_norm, ffn_norm]}

    def _layer_weights(self, i: int) -> dict[str, Any]:
        p, layer = self.params, names.decoder_layers(self.config)[i]
        cross = layer.cross_attn is not None and layer.cross_attn_norm is not None
        norms = (
            (layer.self_attn_norm, layer.cross_attn_norm, layer.ffn_norm)
            if cross
            else (layer.self_attn_norm, layer.ffn_norm)
        )
        return {
            "mixer": layer.self_attn.take(p),
            "cross": layer.cross_attn.take(p) if layer.cross_attn is not None else None,
            "ffn": layer.ffn.take(p),
            "ln": [norm.take(p) for norm in norms if norm is not None],
        }

    # --- real-time path ------------------------------------------------------------------------
    def _embed(self, x: np.ndarray, pos: int) -> np.ndarray:
        cfg, p = self.config, self.params
        if cfg.inputs == "tokens":
            h = p[names.TOK_EMBED][x] * np.float32(np.sqrt(cfg.d_model))  # [B, 1] -> [B, 1, D]
        else:
            h = linear(x, **names.IN_PROJ.take(p))  # [B, 1, d_in] -> [B, 1, D]
        return h if self._pe is None else h + self._pe[pos]  # [B, 1, D]; windowed, ssm: no positions

    def _cache_piece(self, q: np.ndarray, layer: int, pos: int) -> SoftmaxState:
        """Online-softmax state of the cached keys 0..pos-1 (ring: the slots of the window) for
        query q [B, H, 1, dh]."""
        s = scaled_scores(q, self._k[layer])  # [B, H, 1, N], all N rows: constant work
        if self._bias:
            s += self._bias[layer][pos]  # [H, 1, W] relative-position terms at ring position pos
        live = self._live[pos]  # [N]
        # stale rows selected out of the scores (weight exactly 0) and of V (0 * inf would be NaN):
        # whatever a stale row holds, it cannot reach the output
        v = np.where(live[:, None], self._v[layer], np.float32(0.0))  # [B, H, N, dh]
        return chunk_state(s, live, v)

    def _mix(self, h: np.ndarray, layer: int, pos: int) -> np.ndarray:
        """The layer's mixer on h [B, 1, D]: the state-space step over the state the step at pos
        reads, writing the layer's slice of the state it writes (ssm), or self-attention over
        the cache, staging the new K/V rows (attention). -> [B, 1, D]."""
        if self.block == "attention":
            return self._self_attention(h, layer, pos)
        read, write = self._rw[pos & 1]  # [B, L, D, N] each
        mixer = self._layers[layer]["mixer"]
        out, write[:, layer] = ssm_step(h[:, 0], read[:, layer], **mixer)  # [B, D], [B, D, N]
        return out[:, None]  # [B, 1, D]

    def _self_attention(self, h: np.ndarray, layer: int, pos: int) -> np.ndarray:
        w, nh = self._layers[layer]["mixer"], self.config.n_heads
        q = split_heads(linear(h, w=w["w_q"], b=w["b_q"]), nh)  # [B, H, 1, dh]
        k = split_heads(linear(h, w=w["w_k"], b=w["b_k"]), nh)  # [B, H, 1, dh]
        v = split_heads(linear(h, w=w["w_v"], b=w["b_v"]), nh)  # [B, H, 1, dh]
        self._k_new[layer] = k
        self._v_new[layer] = v
        s_own = scaled_scores(q, k)[..., 0]  # [B, H, 1]
        if self._bias:
            s_own += self._bias[layer][0, :, :, 0]  # [H, 1] distance 0 (any ring position: column 0)
        own = SoftmaxState(m=s_own, l=np.ones(q.shape[:-1], np.float32), acc=v)  # exp(s - s) = 1
        heads = finalize(merge(self._cache_piece(q, layer, pos), own))  # [B, H, 1, dh]
        return linear(merge_heads(heads), w=w["w_o"], b=w["b_o"])  # [B, 1, D]

    def _cross_attention(self, h: np.ndarray, layer: int) -> np.ndarray:
        assert self._cross is not None
        ck, cv, allowed = self._cross
        w, nh = self._layers[layer]["cross"], self.config.n_heads
        q = split_heads(linear(h, w=w["w_q"], b=w["b_q"]), nh)  # [B, H, 1, dh]
        heads = attention(q, ck[layer], cv[layer], mask=allowed)  # [B, H, 1, dh]
        return linear(merge_heads(heads), w=w["w_o"], b=w["b_o"])  # [B, 1, D]

    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """One position; writes self._y (returned, same array every call) and stages the new
        K/V rows (ssm: writes staged_state(pos)); never writes the committed state. Real-time:
        temporaries only, bounded work."""
        cfg, eps = self.config, self.config.ln_eps
        if cfg.arch == "encoder-decoder" and self._cross is None:
            raise RuntimeError("set_source() must run before the first step")  # the session checks this first
        h = self._embed(x, pos)  # [B, 1, D]
        for i, w in enumerate(self._layers):
            h = layer_norm(h + self._mix(h, i, pos), **w["ln"][0], eps=eps)
            if w["cross"] is not None:
                h = layer_norm(h + self._cross_attention(h, i), **w["ln"][1], eps=eps)
            h = layer_norm(h + feed_forward(h, **w["ffn"]), **w["ln"][-1], eps=eps)  # [B, 1, D]
        np.copyto(self._y, project_out(self.params, cfg, h))  # [B, 1, d_out | V]
        return self._y

    # --- not real-time -----------------------------------------------------------------------------
    def full(self, x: np.ndarray) -> np.ndarray:
        return forward(self.params, self.config, x)  # ssm: the parallel (scan) form

    def set_source(self, src: np.ndarray, src_valid: np.ndarray) -> None:
        cfg = self.config
        memory = encode(self.params, cfg, src, src_valid=src_valid)  # [B, N, D]
        ks, vs = [], []
        for i in range(cfg.n_layers):
            w = self._layers[i]["cross"]
            ks.append(split_heads(linear(memory, w=w["w_k"], b=w["b_k"]), cfg.n_heads))  # [B, H, N, dh]
            vs.append(split_heads(linear(memory, w=w["w_v"], b=w["b_v"]), cfg.n_heads))
        allowed = src_valid[:, None, None, :]  # [B, 1, 1, N]
        self._cross = (np.stack(ks), np.stack(vs), allowed)  # [L, B, H, N, dh] x2


class GrowingNumpyBackend(NumpyBackend):
    """Growing-cache variant: attends over rows 0..pos-1 only. NOT constant time per step."""

    name = "numpy-growing"
    static_cache = False
    ring_cache = False  # a growing cache has no ring: windowed artifacts are refused
    refuses = {
        "ssm": "it is attention's growing-KV-cache variant (its cost grows with the position, kept for "
        "comparison); an ssm step costs the same at every position already, so there is nothing for it to "
        "do: use backend 'numpy'"
    }

    def _cache_piece(self, q: np.ndarray, layer: int, pos: int) -> SoftmaxState:
        if pos == 0:
            return empty_state(q.shape[:-1], q.shape[-1], np.dtype(np.float32))
        s = scaled_scores(q, self._k[layer, :, :, :pos])  # [B, H, 1, pos]: grows with pos
        return chunk_state(s, None, self._v[layer, :, :, :pos])


BACKENDS = {"numpy": NumpyBackend, "numpy-growing": GrowingNumpyBackend}
