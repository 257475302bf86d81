"""What the generator reads from an artifact: the plan of the C step, and what it refuses.

A `Plan` is everything the emitted C depends on -- the model's shapes, the batch, the declared
input domain and output bound, the weights, and two kinds that select the emitters:

    cache_kind   how past keys are kept, tickformer.artifact.format.cache_kind: "static" (N =
                 max_len rows, row p holds position p; rows >= pos are stale and selected out)
                 or "ring" (a sliding window of W rows: the step at ring position r in [0, 3W)
                 reads the slots contracts.ring_buffer.slot_read selects and commits to
                 ring_slot(r, W); codegen/caches.py RingCache), or "state" for the ssm block
                 (its double-buffered state, StateCache).
    block_kind   what one layer computes: "attention" (post-LN self-attention + FFN) or "ssm"
                 (the selective state-space mixer + FFN, manifest kind "ssm"; its per-layer
                 state_bound is read into the plan).

Refusals (each an ArtifactError that names the thing and what to use instead): an
architecture or input kind without an emitter (encoder-decoder for now), a config field this
generator does not know (a future field changes the step's meaning, so guessing would emit a
wrong step), a manifest key it does not know, a manifest `kind` without a block kind here
(named), and weights whose names or shapes differ from
the documented scheme (docs/artifact_format.md).

Not real-time code (reads the artifact once).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tickformer.artifact import Artifact
from tickformer.artifact import format as fmt
from tickformer.errors import ArtifactError
from tickformer.model.config import Config

# Config fields whose meaning this generator implements (model/config.py at the time of writing).
# A field outside this set is refused: the step it implies is not the one emitted here.
KNOWN_CONFIG_FIELDS = frozenset(
    {
        "arch",
        "inputs",
        "d_model",
        "n_heads",
        "d_ff",
        "n_layers",
        "n_enc_layers",
        "vocab_size",
        "d_in",
        "d_out",
        "max_len",
        "dropout",
        "ln_eps",
        "window",  # a sliding window: the ring cache kind
        "block",  # "attention" or "ssm" (the state-space block kind)
        "d_state",
    }
)
# Manifest keys of format version 2 (docs/artifact_format.md). Same rule.
KNOWN_MANIFEST_KEYS = frozenset(
    {
        "format",
        "version",
        "config",
        "batch",
        "max_len",
        "opset",
        "precision",
        "fp16",
        "score_bounds",
        "input_domain",
        "input_domain_columns",  # one [lo, hi] per input column: tf_check_input checks each (source.py)
        "signals",  # the logged signals' names, units and order: named in the header (source.py)
        "output_bound",
        "graphs",
        "files",
        "tolerance",
        "equivalence",
        "versions",
        "created_utc",
        "source",
        "manifest_sha256",
        "kind",  # "ssm" (the only value written today); another is refused by name
        "state_bound",
        "release",  # the artifact's release number (artifact/ranges.py): bookkeeping, not the step's arithmetic
    }
)
KINDS = ("ssm",)  # manifest "kind" values with a block kind here (format.artifact_kind)
SUPPORTED = (
    "decoder-only artifacts with continuous or token inputs: attention (full or windowed) or the ssm block"
)


@dataclass(frozen=True)
class Plan:
    """The generator's view of one artifact (see the module docstring)."""

    config: Config
    batch: int
    domain: tuple[float, float]
    output_bound: float | None
    artifact_sha256: str
    params: dict[str, np.ndarray] = field(repr=False)
    cache_kind: str = "static"
    block_kind: str = "attention"
    state_bound: tuple[float, ...] = ()  # ssm: the manifest's per-layer state bound S_l
    columns: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # per input column (lows, highs)
    signals: dict[str, Any] | None = field(default=None, repr=False)  # the manifest's "signals"
    weight_format: str = "fp32"  # the layer matrices' storage (codegen/weights.py); arithmetic is float32

    # --- shapes (llama2.c names) ------------------------------------------------------------
    @property
    def d(self) -> int:
        return self.config.d_model

    @property
    def heads(self) -> int:
        return self.config.n_heads

    @property
    def dh(self) -> int:
        return self.config.d_head

    @property
    def rows(self) -> int:
        """Cache rows N: max_len (static cache) or the window W (ring cache); format.cache_rows."""
        return fmt.cache_rows(self.config)

    @property
    def window(self) -> int | None:
        return self.config.window

    @property
    def positions(self) -> int:
        """How many values tf_stage's `pos` takes: max_len (static: the absolute position), 3W
        (ring: the ring position, contracts.ring_buffer.ring_position), or any int32 >= 0 (ssm:
        the session's position, of which only the parity matters)."""
        if self.block_kind == "ssm":
            return 2**31 - 1
        return self.config.max_len if self.window is None else 3 * self.window

    @property
    def d_state(self) -> int:
        return self.config.d_state

    @property
    def has_pe(self) -> bool:
        """Whether the embedding adds the sinusoidal table (model/transformer.py embed: not for
        windowed models nor ssm blocks)."""
        return self.window is None and self.block_kind != "ssm"

    @property
    def tokens(self) -> bool:
        return self.config.inputs == "tokens"

    @property
    def d_in(self) -> int:
        return 1 if self.tokens else self.config.d_in  # tokens: one int64 id per batch row

    @property
    def d_out(self) -> int:
        return self.config.vocab_size if self.tokens else self.config.d_out

    def param(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        """The float32 parameter `name`, checked against `shape` (ArtifactError otherwise)."""
        value = self.params.get(name)
        if value is None:
            raise ArtifactError(
                f"weights.npz has no parameter {name!r}, which the C step needs; re-export the artifact "
                "with this tickformer"
            )
        if value.shape != shape or value.dtype != np.float32:
            raise ArtifactError(
                f"parameter {name!r} is {value.dtype} {value.shape}, the C step needs float32 {shape}; "
                "re-export the artifact"
            )
        return value


def plan_for(artifact: Artifact, weights: str = "fp32") -> Plan:
    """Check that codegen supports `artifact` and read what the C step needs. Raises
    ArtifactError naming the unsupported kind or field. `weights`: the layer matrices' storage
    format (codegen/weights.py; ssm artifacts: fp32 only). Not real-time (reads weights.npz)."""
    from .weights import check_format

    check_format(weights)
    manifest = artifact.manifest
    kind = manifest.get("kind")
    if kind is not None and kind not in KINDS:
        raise ArtifactError(
            f"{artifact.root}: codegen does not support artifact kind {kind!r} (it supports {SUPPORTED}); "
            "use backend 'ort' or 'numpy' for this artifact"
        )
    unknown_keys = sorted(set(manifest) - KNOWN_MANIFEST_KEYS)
    if unknown_keys:
        raise ArtifactError(
            f"{artifact.root}: manifest keys {unknown_keys} are not known to tickformer codegen (it "
            f"supports {SUPPORTED}); "
            f"the C step cannot honour them: use backend 'ort' or 'numpy' for this artifact"
        )
    raw = manifest.get("config", {})
    unknown = sorted(set(raw) - KNOWN_CONFIG_FIELDS)
    if unknown:
        raise ArtifactError(
            f"{artifact.root}: config fields {unknown} are not supported by tickformer codegen (it "
            f"supports {SUPPORTED} "
            f"with fields {sorted(KNOWN_CONFIG_FIELDS)}); use backend 'ort' or 'numpy' for this artifact"
        )
    cfg = artifact.config
    if cfg.arch != "decoder":
        raise ArtifactError(
            f"{artifact.root}: codegen does not support arch {cfg.arch!r} yet (it supports {SUPPORTED}); "
            f"use backend 'ort' or 'numpy' for encoder-decoder artifacts"
        )
    if cfg.max_len != artifact.max_len:
        raise ArtifactError(
            f"{artifact.root}: config max_len {cfg.max_len} differs from the manifest's max_len "
            f"{artifact.max_len}; re-export the artifact"
        )
    sha = manifest.get("manifest_sha256")
    if not isinstance(sha, str) or len(sha) != 64:
        raise ArtifactError(f"{artifact.root}: manifest has no manifest_sha256; re-export the artifact")
    ssm = cfg.block == "ssm"
    if ssm != (kind == "ssm"):
        raise ArtifactError(
            f"{artifact.root}: config block {cfg.block!r} and manifest kind {kind!r} disagree; re-export the artifact"
        )
    if ssm and weights != "fp32":
        raise ArtifactError(
            f"{artifact.root}: --weights {weights} is for attention artifacts; the ssm block's C step stores fp32 only"
        )
    return Plan(
        weight_format=weights,
        config=cfg,
        batch=artifact.batch,
        domain=artifact.input_domain,
        output_bound=_output_bound(manifest),
        artifact_sha256=sha,
        params=artifact.params(),
        cache_kind="state" if ssm else fmt.cache_kind(cfg),
        block_kind="ssm" if ssm else "attention",
        state_bound=_state_bound(manifest, cfg.n_layers) if ssm else (),
        columns=artifact.input_domain_columns,
        signals=manifest.get("signals") if isinstance(manifest.get("signals"), dict) else None,
    )


def _state_bound(manifest: dict[str, Any], layers: int) -> tuple[float, ...]:
    """The manifest's per-layer state bound S_l (contracts/state_bound.py), checked finite."""
    raw = manifest.get("state_bound")
    values = raw.get("layers") if isinstance(raw, dict) else None
    try:
        bound = tuple(float(v) for v in values)  # type: ignore[union-attr]
    except (TypeError, ValueError):
        bound = ()
    if len(bound) != layers or not all(0.0 < b < float("inf") for b in bound):
        raise ArtifactError(
            f"manifest state_bound {raw!r} does not give a finite positive bound per layer ({layers}); re-export the "
            "artifact"
        )
    return bound


def _output_bound(manifest: dict[str, Any]) -> float | None:
    bound = manifest.get("output_bound")
    return None if bound is None else float(bound)
