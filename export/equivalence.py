"""Three-way equivalence at export time: numpy reference vs onnx.reference vs onnxruntime (CPU).

Seeded inputs over the declared domain (uniform inside it, plus one sequence pinned at its
edges, lo and hi), compared at every position 1..max_len:

    model    full passes at lengths {1, 2, N/2, N} (decoder-only)
    step     one sequence of N steps from a cache pre-filled with huge finite values (1e30),
             so stale rows that leaked would show; each engine feeds its own k_new/v_new back
    encoder  cross K/V from a half-padded and an unpadded source (encoder-decoder)

against the numpy reference model (model/transformer.py). Every pair's max abs error and
normwise relative error (max|a-b| / max|b|) is returned for the manifest; `check` raises
ExportError when any pair exceeds the stated tolerance (export/bounds.py).

Not real-time code: runs once, at export (ReferenceEvaluator is slow: kept to one step sequence).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import numpy as np
import onnx
from onnx.reference import ReferenceEvaluator

from tickformer.artifact.format import cache_shape, io_names, step_feeds, step_outputs
from tickformer.contracts.ring_buffer import ring_slot
from tickformer.errors import ExportError
from tickformer.model import names
from tickformer.model.config import Config
from tickformer.model.layers import linear, split_heads
from tickformer.model.transformer import encode, forward
from tickformer.runtime.ort_session import make_session

Runner = Callable[[Mapping[str, np.ndarray]], list[np.ndarray]]
STALE = 1e30  # planted in the initial cache: finite, huge


def runners(graph: onnx.ModelProto, *, reference: bool = True) -> dict[str, Runner]:
    """The two ONNX engines on one graph: onnx.reference and onnxruntime CPU (1 thread);
    reference=False: onnxruntime only (a graph onnx.reference cannot run)."""
    session = make_session(graph)
    out: dict[str, Runner] = {"ort": lambda feeds: session.run(None, dict(feeds))}
    if reference:
        evaluator = ReferenceEvaluator(graph)
        out["reference"] = lambda feeds: _quiet(evaluator.run, dict(feeds))
    return out


def _quiet(run: Callable[..., Any], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """onnx.reference computes in numpy: the Exp of a planted stale row overflows (and is then
    selected out by Where); silence numpy's warning, the result is checked anyway."""
    with np.errstate(over="ignore", invalid="ignore"):
        return list(run(None, feeds))


def sample_inputs(config: Config, batch: int, domain: tuple[float, float], seed: int) -> list[np.ndarray]:
    """Seeded full-length inputs: uniform in the domain, and (continuous) one pinned at lo/hi."""
    rng = np.random.default_rng(seed)
    n = config.max_len
    if config.inputs == "tokens":
        return [rng.integers(0, config.vocab_size, size=(batch, n), dtype=np.int64)]
    lo, hi = domain
    uniform = rng.uniform(lo, hi, size=(batch, n, config.d_in)).astype(np.float32)  # [B, N, d_in]
    edges = np.where(rng.random((batch, n, config.d_in)) < 0.5, lo, hi).astype(np.float32)  # [B, N, d_in]
    return [uniform, edges]


def errors(got: np.ndarray, want: np.ndarray) -> dict[str, float]:
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    scale = float(np.abs(want).max()) if want.size else 0.0
    max_abs = float(diff.max()) if diff.size else 0.0
    return {"max_abs": max_abs, "max_rel": max_abs / scale if scale > 0 else max_abs}


class Record:
    """Worst errors per pair, plus the worst elementwise tolerance excess."""

    def __init__(self, tolerance: Mapping[str, Any]) -> None:
        self.atol, self.rtol = float(tolerance["atol"]), float(tolerance["rtol"])
        self.pairs: dict[str, dict[str, float]] = {}
        self.failures: list[str] = []

    def add(self, pair: str, got: np.ndarray, want: np.ndarray) -> None:
        e = errors(got, want)
        old = self.pairs.setdefault(pair, {"max_abs": 0.0, "max_rel": 0.0})
        old["max_abs"] = max(old["max_abs"], e["max_abs"])
        old["max_rel"] = max(old["max_rel"], e["max_rel"])
        excess = np.abs(got.astype(np.float64) - want) - (
            self.atol + self.rtol * np.abs(want.astype(np.float64))
        )
        if not np.all(excess <= 0):  # also catches NaN
            self.failures.append(
                f"{pair}: max abs error {e['max_abs']:.3g} exceeds atol {self.atol:.3g} + rtol {self.rtol:.3g} |ref|"
            )

    def add3(self, graph: str, outs: Mapping[str, np.ndarray], ref: np.ndarray) -> None:
        self.add(f"{graph}:ort_vs_numpy", outs["ort"], ref)
        self.add(f"{graph}:reference_vs_numpy", outs["reference"], ref)
        self.add(f"{graph}:ort_vs_reference", outs["ort"], outs["reference"])


def default_lengths(n: int) -> list[int]:
    return sorted({1, min(2, n), max(1, n // 2), n})


def model_lengths(lengths: list[int] | None, n: int) -> list[int]:
    """The full-pass lengths to compare: `lengths` sorted without repeats (None: the default
    {1, 2, N/2, N}); ExportError unless they lie in 1..max_len n."""
    chosen = default_lengths(n) if lengths is None else sorted(set(lengths))
    if not chosen or chosen[0] < 1 or chosen[-1] > n:
        raise ExportError(f"equivalence lengths {lengths!r} must lie in 1..max_len {n}")
    return chosen


def _check_model(
    graph: onnx.ModelProto,
    params: Mapping[str, np.ndarray],
    config: Config,
    inputs: list[np.ndarray],
    rec: Record,
    lengths: list[int],
) -> None:
    engines = runners(graph)
    in_name = io_names(config)[0]
    for x in inputs:
        for t in lengths:
            ref = forward(dict(params), config, x[:, :t])  # [B, T, out]
            rec.add3("model", {k: run({in_name: x[:, :t]})[0] for k, run in engines.items()}, ref)


def stale_caches(config: Config, batch: int, seed: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """K and V caches [L, B, H, N, dh] filled with +-STALE: rows a correct step never reads."""
    rng = np.random.default_rng(seed)
    k = (STALE * rng.choice([-1.0, 1.0], size=cache_shape(config, batch))).astype(np.float32)
    v = (STALE * rng.choice([-1.0, 1.0], size=cache_shape(config, batch))).astype(np.float32)
    return k, v


def step_through(
    run: Runner,
    config: Config,
    x: np.ndarray,
    cross: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
    *,
    caches: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """Run a step graph over every position of x ([B, T] tokens or [B, T, d_in]), writing
    k_new / v_new back into cache row t (ring caches: row ring_slot(t, W), T may exceed W: the
    ring wraps) as the runtime does; returns [B, T, out]. `run` maps
    feeds to the graph's outputs (`runners`); caches: the initial (K, V) [L, B, H, N, dh],
    zeros by default (`stale_caches` plants rows a correct step never reads). Not real-time."""
    batch, n = x.shape[0], x.shape[1]
    if caches is None:
        k, v = (
            np.zeros(cache_shape(config, batch), np.float32),
            np.zeros(cache_shape(config, batch), np.float32),
        )
    else:
        k, v = caches
    ys = []
    for t in range(n):
        y, k_new, v_new = step_outputs(config, run(step_feeds(config, x[:, t : t + 1], t, k, v, cross)))
        row = t if config.window is None else ring_slot(t, config.window)
        k[:, :, :, row] = k_new[:, :, :, 0]
        v[:, :, :, row] = v_new[:, :, :, 0]
        ys.append(y[:, 0])
    return np.stack(ys, axis=1)  # [B, N, out]


def _cross_kv(
    params: Mapping[str, np.ndarray], config: Config, src: np.ndarray, valid: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    memory = encode(dict(params), config, src, src_valid=valid)  # [B, N, D]
    cross = [layer.cross_attn for layer in names.decoder_layers(config) if layer.cross_attn is not None]
    ks = [
        split_heads(linear(memory, w=params[ca["w_k"]], b=params[ca["b_k"]]), config.n_heads) for ca in cross
    ]
    vs = [
        split_heads(linear(memory, w=params[ca["w_v"]], b=params[ca["b_v"]]), config.n_heads) for ca in cross
    ]
    return np.stack(ks), np.stack(vs)  # [L, B, H, N, dh] x2


def check(
    graphs: Mapping[str, onnx.ModelProto],
    params: Mapping[str, np.ndarray],
    config: Config,
    batch: int,
    domain: tuple[float, float],
    tolerance: Mapping[str, Any],
    seed: int = 0,
    lengths: list[int] | None = None,
) -> dict[str, Any]:
    """Run the three-way comparison; return the manifest's `equivalence` entry.
    lengths: full-pass lengths to compare (default {1, 2, N/2, N}); the step sequence runs
    max(lengths) positions. Raises ExportError if any pair exceeds the tolerance."""
    rec = Record(tolerance)
    inputs = sample_inputs(config, batch, domain, seed)
    n = config.max_len
    lengths_run = model_lengths(lengths, n)
    steps = lengths_run[-1]
    step = runners(graphs["step"])
    if (
        config.block == "ssm"
    ):  # the Scan graph on ORT (onnx.reference's Scan: axis 0 only); the step, state fed back
        from .ssm_graphs import ssm_step_through

        in_name = io_names(config)[0]
        full = runners(graphs["model"], reference=False)["ort"]
        for x in inputs:
            for t in lengths_run:
                ref = forward(dict(params), config, x[:, :t])  # [B, T, out]
                rec.add("model:ort_vs_numpy", full({in_name: x[:, :t]})[0], ref)
        x = inputs[0][:, :steps]
        ref = forward(dict(params), config, x)  # [B, T, out]
        rec.add3("step", {k: ssm_step_through(run, config, x) for k, run in step.items()}, ref)
    elif config.arch == "decoder":
        _check_model(graphs["model"], params, config, inputs, rec, lengths_run)
        x = inputs[0][:, :steps]
        ref = forward(dict(params), config, x)  # [B, T, out]
        rec.add3(
            "step",
            {k: step_through(run, config, x, caches=stale_caches(config, batch)) for k, run in step.items()},
            ref,
        )
    else:
        encoder = runners(graphs["encoder"])
        rng = np.random.default_rng(seed + 1)
        tgt = inputs[0][:, :steps]  # [B, T]
        for s in sorted({max(1, n // 2), n}):
            src = rng.integers(0, config.vocab_size, size=(batch, s), dtype=np.int64)  # [B, S]
            padded = np.zeros((batch, n), dtype=np.int64)
            padded[:, :s] = src
            valid = np.zeros((batch, n), dtype=np.bool_)
            valid[:, :s] = True
            feeds = {"src": padded, "src_valid": valid}
            kv = {k: run(feeds) for k, run in encoder.items()}
            ref_k, ref_v = _cross_kv(params, config, padded, valid)
            rec.add3("encoder", {k: o[0] for k, o in kv.items()}, ref_k)
            rec.add3("encoder", {k: o[1] for k, o in kv.items()}, ref_v)
            ref = forward(dict(params), config, tgt, src=src)  # unpadded source: padding must not matter
            outs = {
                k: step_through(
                    run, config, tgt, (kv[k][0], kv[k][1], valid), caches=stale_caches(config, batch)
                )
                for k, run in step.items()
            }
            rec.add3("step", outs, ref)
        lengths_run = []  # no full-pass graph compared
    if rec.failures:
        overflow = any(" nan " in f or " inf " in f for f in rec.failures)
        raise ExportError(
            "exported graphs disagree with the numpy reference beyond the stated tolerance: "
            + "; ".join(rec.failures[:3])
            + (f" (and {len(rec.failures) - 3} more)" if len(rec.failures) > 3 else "")
            + (
                "; the errors are NaN/Inf: the model overflows on inputs of this domain, declare a narrower "
                "--domain (the real range of your signals)"
                if overflow
                else "; report it with the checkpoint"
                + ("" if config.block == "ssm" else ", or export with --precision fp32")
            )
        )
    return {
        "seed": seed,
        "step_positions": steps,
        "model_lengths": lengths_run,
        "inputs": len(inputs) if config.arch == "decoder" else 1,
        "pairs": rec.pairs,
    }
