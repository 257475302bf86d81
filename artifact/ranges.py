"""The range of every number an artifact's manifest holds, checked at load, signed or not.

A signature says who sealed a manifest, not that its numbers make sense: a re-sealed `ln_eps` of
1e30 or an `output_bound` of 1e-300 loaded before this check, and ONNX Runtime and numpy then
silently disagreed. `check_ranges(manifest)` walks every numeric field (the dotted path, list
indices as `*`), finds its range in RANGES by the first matching pattern, and refuses a value
outside it in one line naming the field, the value and the range. A numeric field that matches
no pattern is refused too (a field this tickformer does not know the meaning of is not read as
if it did); records that no code reads are listed in RECORDS and only checked finite.

The ranges are wide: what the format can mean on any machine we target, not what our presets
use. Sizes are bounded by what a session could allocate (`batch x max_len x d_model` float32 per
layer must fit in MEMORY_BUDGET bytes: `check_sizes`). Not real-time code (load time).
"""

from __future__ import annotations

import fnmatch
import math
from typing import Any, Iterator

from tickformer.safe_files import MAX_FILE_BYTES

F32_MAX = 3.4028234663852886e38
MEMORY_BUDGET = 8 << 30  # bytes a session's caches may take (batch x max_len x d_model x layers x 2 x 4)

# pattern -> (lo, hi, what it is); lo and hi inclusive
RANGES: tuple[tuple[str, tuple[float, float, str]], ...] = (
    ("version", (1, 99, "the artifact format version")),
    ("release", (0, 2**63 - 1, "the artifact's release number (monotonic)")),
    ("opset", (13, 23, "the ONNX opsets this tickformer writes and reads")),
    ("batch", (1, 4096, "rows per step")),
    ("max_len", (1, 1 << 20, "positions a session holds")),
    ("config.max_len", (1, 1 << 20, "positions a session holds")),
    ("config.d_model", (1, 1 << 15, "the model width")),
    ("config.n_heads", (1, 1 << 10, "attention heads")),
    ("config.d_ff", (1, 1 << 17, "the feed-forward width")),
    ("config.n_layers", (1, 1 << 10, "layers")),
    ("config.n_enc_layers", (0, 1 << 10, "encoder layers")),
    ("config.vocab_size", (0, 1 << 22, "tokens")),
    ("config.d_in", (0, 1 << 16, "input width")),
    ("config.d_out", (0, 1 << 16, "output width")),
    ("config.dropout", (0.0, 0.999, "training dropout (unused at inference; a probability)")),
    ("config.ln_eps", (1e-12, 1e-2, "LayerNorm's epsilon: a small positive number (1e-5 by default)")),
    ("config.window", (1, 1 << 20, "sliding-window length")),
    ("config.d_state", (0, 1 << 12, "state-space states per channel")),
    ("input_domain.*", (-F32_MAX, F32_MAX, "the declared input domain (float32 numbers)")),
    ("input_domain_columns.*", (-F32_MAX, F32_MAX, "an input column's declared domain (float32 numbers)")),
    ("tolerance.atol", (0.0, 1.0, "the stated absolute tolerance of the backends' agreement")),
    ("tolerance.rtol", (0.0, 1.0, "the stated relative tolerance of the backends' agreement")),
    ("output_bound", (1e-30, F32_MAX, "the analytic bound on |y| (a positive float32 number)")),
    ("score_bounds.layers.*.q_norm", (0.0, F32_MAX, "a query projection's norm bound")),
    ("score_bounds.layers.*.k_norm", (0.0, F32_MAX, "a key projection's norm bound")),
    ("score_bounds.layers.*.score", (0.0, F32_MAX, "a layer's attention score bound")),
    ("state_bound.layers.*", (0.0, F32_MAX, "an ssm layer's state bound")),
    ("state_bound.exact.*", (0.0, F32_MAX, "an ssm layer's exact state bound")),
    ("state_bound.input_radius.*", (0.0, F32_MAX, "an ssm layer's input radius")),
    ("files.*.bytes", (0, MAX_FILE_BYTES, "a listed file's size: what the safe reader reads at most")),
    ("graphs.*.inputs.*.shape.*", (1, 1 << 31, "a graph input's static dimension")),
    ("graphs.*.outputs.*.shape.*", (1, 1 << 31, "a graph output's static dimension")),
)
# Records of the export that no code reads to run the model: checked to be finite numbers only.
RECORDS = ("equivalence.*", "fp16.*", "source.*", "versions.*", "engines.*", "signals.*")


def leaves(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path with list indices as '*', value) of every leaf."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from leaves(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for v in value:
            yield from leaves(v, f"{path}.*" if path else "*")
    else:
        yield path, value


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def range_of(path: str) -> tuple[float, float, str] | None:
    for pattern, rng in RANGES:
        if fnmatch.fnmatchcase(path, pattern):
            return rng
    return None


def problems(manifest: dict[str, Any]) -> list[str]:
    """One line per number outside its range (or without one); [] when every number is in range."""
    out = []
    for path, v in leaves(manifest):
        if not _is_number(v):
            continue
        if any(fnmatch.fnmatchcase(path, p) for p in RECORDS):
            if not math.isfinite(v):
                out.append(f"{path} is {v!r}: a recorded number must be finite")
            continue
        rng = range_of(path)
        if rng is None:
            out.append(f"{path} = {v!r} is a number this tickformer has no range for (an unknown field)")
            continue
        lo, hi, what = rng
        if not (math.isfinite(v) and lo <= v <= hi):
            out.append(f"{path} = {v!r} is outside [{lo:g}, {hi:g}] ({what})")
    out.extend(size_problems(manifest))
    return out


def size_problems(manifest: dict[str, Any]) -> list[str]:
    """The caches a session allocates at load: 2 x layers x batch x max_len x d_model float32 (K
    and V; an ssm state is smaller), refused over MEMORY_BUDGET before anything is allocated."""
    cfg = manifest.get("config")
    if not isinstance(cfg, dict):
        return []
    dims = [manifest.get("batch"), manifest.get("max_len"), cfg.get("d_model")]
    stacks = [cfg.get("n_layers") or 0, cfg.get("n_enc_layers") or 0]
    # a value of the wrong type is the schema's to name (a dict for n_layers once raised TypeError here)
    if not all(_is_number(d) and d > 0 for d in dims) or not all(_is_number(n) for n in stacks):
        return []
    layers = stacks[0] + stacks[1]
    need = 2 * layers * dims[0] * dims[1] * dims[2] * 4
    if need > MEMORY_BUDGET:
        return [
            f"batch {dims[0]} x max_len {dims[1]} x d_model {dims[2]} x {layers} layers needs "
            f"{need / 2**30:.1f} GiB of caches, over the budget of {MEMORY_BUDGET / 2**30:.0f} GiB"
        ]
    return []
