"""What `tickformer verify` runs: a bare ONNX model users bring (ForeignModel: the graph and an
optional KV-cache step graph under real ONNX Runtime sessions), or one of our artifacts through
`tickformer.runtime` sessions, one class per artifact kind.

    ForeignModel         any number of inputs and outputs, float/int/bool, static or dynamic axes
                         (signature: tickformer.artifact.foreign; sessions: tickformer.runtime.foreign)
    DecoderArtifact      kind "decoder": continuous [B, T, d_in] or token [B, T] inputs
    WindowedArtifact     kind "windowed": a decoder with a sliding window on ring caches
    Seq2SeqArtifact      kind "encoder-decoder": a source [B, S] (padded internally) and the target
                         decoded one step at a time (there is no full-pass graph)
    SsmArtifact          kind "ssm": the fixed-state recurrent (state-space) block
    ARTIFACT_KINDS       artifact kind (tickformer.artifact.format.artifact_kind) -> class

Adding a kind is a class here with the hooks ArtifactModel documents, one line in
ARTIFACT_KINDS, its plan in plans.py (PLANS) and its property names (PROPERTY_NAMES).

Loaders only validate and store; nothing here is real-time code.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np
from hypothesis import strategies as st

from tickformer import runtime
from tickformer.artifact import open_artifact
from tickformer.artifact.foreign.breakpoints import break_points
from tickformer.artifact.foreign.inference import open_signature
from tickformer.artifact.foreign.memory import check_memory
from tickformer.artifact.foreign.spec import Flags
from tickformer.artifact.format import artifact_kind
from tickformer.errors import ArtifactError, ConfigError
from tickformer.model.transformer import forward
from tickformer.runtime.budget import active, default_memory
from tickformer.runtime.foreign import Graph, Reference, Stepper, provider_of

from .strategies import (
    domain_arrays,
    id_arrays,
    into_columns,
    out_of_domain_values,
    out_of_vocab_ids,
    token_arrays,
)

# ----------------------------------------------------------------------------- bare ONNX


class ForeignModel:
    """A bare .onnx (plus --step STEP.onnx for a KV-cache pair) under ONNX Runtime; `sig` is its
    Signature (spec file, flags, inference: tickformer.artifact.foreign)."""

    kind = "onnx"

    def __init__(
        self,
        path: str | Path,
        backend: str = "ort",
        max_t: int = 16,
        *,
        spec: str | Path | None = None,
        flags: Any = None,
        search: bool = True,
    ) -> None:
        flags = flags if flags is not None else Flags()
        flags.max_t = max_t
        self.path, self.backend, self.max_t = Path(path), backend, max_t
        self.provider = provider_of(backend)
        self.sig, data, step_data = open_signature(path, spec=spec, flags=flags)
        budget = active()
        check_memory(self.sig, budget.memory if budget is not None else default_memory())
        self._bytes = {"full": data, "step": step_data}
        self._names = {"full": str(path), "step": str(self.sig.cache.step) if self.sig.cache else ""}
        self._graphs = {"full": Graph(data, name=str(path), provider=self.provider)}
        if self.sig.cache is not None and self.sig.cache.same:
            self._graphs["step"] = self._graphs["full"]  # the model is its own step graph
        elif step_data is not None:
            self._graphs["step"] = Graph(step_data, name=self._names["step"], provider=self.provider)
        self._unoptimized: dict[str, Any] = {}
        self._reference: dict[str, Any] = {}
        self.search = search  # graph break points in the strategies, output_bound's targeted search
        self.breaks: dict[str, tuple[float, ...]] = {}
        if search:
            for which in ("full", "step"):
                if self._bytes[which] is not None:
                    for name, pts in break_points(self.model_proto(which)).items():
                        self.breaks[name] = tuple(dict.fromkeys([*self.breaks.get(name, ()), *pts]))
        self.stepper = Stepper(self.sig, self._graphs["full"], self._graphs["step"]) if step_data else None
        self.cache_lengths: list[int] = []
        self.accepted: dict[str, list[int]] = {
            g: list(range(lo, hi + 1)) for g, (lo, hi) in self.sig.ranges.items()
        }
        self.domain: tuple[float, float] | None = None  # per input, in the signature
        self.tolerance: dict[str, float] | None = None

    def graph(self, which: str) -> Any:
        return self._graphs[which]

    def full(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """{output: array} of the full graph (all optimizations) on feeds."""
        return self._graphs["full"].run(feeds)

    def unoptimized(self, which: str) -> Any:
        """The graph in a session with every ONNX Runtime graph optimization off."""
        if which not in self._unoptimized:
            self._unoptimized[which] = Graph(
                self._bytes[which],
                name=f"{self._names[which]} (unoptimized)",
                provider=self.provider,
                optimization="disable",
            )
        return self._unoptimized[which]

    def reference(self, which: str) -> Any:
        if which not in self._reference:
            self._reference[which] = Reference(self._bytes[which], name=self._names[which])
        return self._reference[which]

    def model_proto(self, which: str) -> Any:
        import onnx

        return onnx.load_model_from_string(self._bytes[which])

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": str(self.path),
            "step": str(self.sig.cache.step) if self.sig.cache else None,
            "backend": self.backend,
            "signature": self.sig.describe(),
        }

    def close(self) -> None:
        self._graphs.clear()
        self._unoptimized.clear()
        self._reference.clear()


OnnxModel = ForeignModel  # the earlier name


# ----------------------------------------------------------------------------- our artifacts


@dataclass
class ArtifactModel:
    """One of our artifacts (a directory with manifest.json): a session of `tickformer.runtime` on
    the chosen backend plus a numpy-backend reference session. Subclasses give the hooks:

        examples(t_range)      strategy of examples (an input sequence, or (source, target))
        stream(example)        the step inputs [B, T, ...] stepped one position at a time
        start(session, ex)     begin a new sequence on a session (reset, or set the source)
        full(example)          the backend's outputs [B, T, G] (full graph, or stepped)
        full_pass(example)     what stepping must equal (the full graph / the numpy full pass)
        reference_out(ex)      the numpy backend's outputs
        named(example)         {name: array} of an example, for the saved counterexample
        bad_values()           strategy of step input values the runtime must refuse
    """

    path: Path
    backend: str = "ort"
    max_t: int = 16
    trust: Path | None = None
    kind: str = field(default="artifact", init=False)

    def __post_init__(self) -> None:
        self.session = runtime.load(self.path, backend=self.backend, trust=self.trust)
        try:
            self.reference = runtime.load(self.path, backend="numpy", trust=self.trust)
        except BaseException:
            self.session.close()
            raise
        cfg = self.config = self.session.config
        self.batch = self.session.batch
        self.tokens = cfg.inputs == "tokens"
        self.features = cfg.d_in if not self.tokens else 1
        self.dtype = np.int64 if self.tokens else np.float32
        self.t_range = (1, min(self.session.max_len, self.max_t))
        self.domain = (0.0, float(cfg.vocab_size - 1)) if self.tokens else tuple(self.session.domain)
        self.tolerance = dict(self.session.artifact.tolerance)

    # --- hooks (decoder-only defaults) ------------------------------------------------------
    def sequences(
        self, t_range: tuple[int, int], domain: tuple[float, float] | None = None
    ) -> st.SearchStrategy:
        b, f = self.batch, self.features
        if self.tokens:
            return token_arrays(self.config.vocab_size, lambda t: (b, t), t_range)
        dom = domain if domain is not None else self.domain
        drawn = domain_arrays(dom, lambda t: (b, t, f), t_range, np.float32)  # type: ignore[arg-type]
        columns = self.session.domain_columns
        return drawn if columns is None else drawn.map(into_columns(dom, columns))

    def examples(
        self, t_range: tuple[int, int], domain: tuple[float, float] | None = None
    ) -> st.SearchStrategy:
        return self.sequences(t_range, domain)

    def stream(self, example: Any) -> np.ndarray:
        return example

    def start(self, session: Any, example: Any) -> None:
        session.reset()

    def full(self, example: Any) -> np.ndarray:
        return self.session.run(np.ascontiguousarray(example, self.dtype))

    def full_pass(self, example: Any) -> np.ndarray:
        return self.full(example)

    def reference_out(self, example: Any) -> np.ndarray:
        return self.reference.run(np.ascontiguousarray(example, self.dtype))

    def named(self, example: Any) -> dict[str, np.ndarray]:
        return {"x": np.asarray(example)}

    def bad_values(self) -> st.SearchStrategy:
        """Values the step must refuse, written at x.flat[0] (batch row 0, input column 0):
        outside the domain, and with per-column domains also inside it but outside column 0's."""
        if self.tokens:
            return out_of_vocab_ids(self.config.vocab_size)
        outside = out_of_domain_values(self.domain)
        columns = self.session.domain_columns
        if columns is None:
            return outside
        lo, hi = self.domain
        below = float(np.nextafter(np.float32(columns[0][0]), np.float32(-np.inf)))
        above = float(np.nextafter(np.float32(columns[1][0]), np.float32(np.inf)))
        inside_envelope = [v for v in (below, above) if lo <= v <= hi]
        return st.one_of(outside, st.sampled_from(inside_envelope)) if inside_envelope else outside

    # --- shared -------------------------------------------------------------------------------
    def steps(self, session: Any, x: np.ndarray) -> np.ndarray:
        """Step `session` through x [B, T, ...] from its current position -> [B, T, G]."""
        out = [
            session.step(np.ascontiguousarray(x[:, t : t + 1])).copy() for t in range(x.shape[1])
        ]  # T x [B, 1, G]
        return np.concatenate(out, axis=1)  # [B, T, G]

    @contextlib.contextmanager
    def fresh(self) -> Iterator[Any]:
        """A newly loaded session (a cache nobody wrote)."""
        with runtime.load(self.path, backend=self.backend, trust=self.trust) as s:
            yield s

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": str(self.path),
            "backend": self.backend,
            "inputs": "tokens" if self.tokens else "continuous",
            "input": [self.batch, list(self.t_range)] + ([] if self.tokens else [self.features]),
            "dtype": np.dtype(self.dtype).name,
        }

    def close(self) -> None:
        for s in (self.session, self.reference):
            s.close()


class DecoderArtifact(ArtifactModel):
    """kind "decoder": model.onnx full pass and step.onnx over the static KV cache."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.kind = "decoder"


class WindowedArtifact(DecoderArtifact):
    """kind "windowed": a decoder with a sliding window W on ring caches of W rows (its session
    slides past max_len); model.onnx takes any T. `receptive` is the number of most recent inputs
    the last output depends on: L (W - 1) + 1 (W per layer, chained through L layers)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.kind = "windowed"
        cfg = self.config
        assert cfg.window is not None
        self.window = cfg.window
        self.receptive = cfg.n_layers * (cfg.window - 1) + 1


class Seq2SeqArtifact(ArtifactModel):
    """kind "encoder-decoder": an example is (src [B, S], tgt [B, T]) token ids; the source is set
    with `set_source` (padded to max_len with a validity mask), the target stepped."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.kind = "encoder-decoder"
        self.params = self.reference.artifact.params()

    def examples(
        self, t_range: tuple[int, int], domain: tuple[float, float] | None = None
    ) -> st.SearchStrategy:
        b, v = self.batch, self.config.vocab_size
        src = st.integers(1, self.session.max_len).flatmap(lambda s: id_arrays((b, s), 0, v - 1))
        return st.tuples(src, self.sequences(t_range))

    def stream(self, example: Any) -> np.ndarray:
        return example[1]

    def start(self, session: Any, example: Any) -> None:
        session.set_source(np.ascontiguousarray(example[0], np.int64))  # also resets to position 0

    def full(self, example: Any) -> np.ndarray:
        self.start(self.session, example)
        return self.steps(self.session, example[1])

    def full_pass(self, example: Any) -> np.ndarray:
        """The numpy model's full teacher-forced pass (model.transformer.forward) over the source."""
        src, tgt = example
        return forward(self.params, self.config, tgt, src=src)

    def reference_out(self, example: Any) -> np.ndarray:
        self.start(self.reference, example)
        return self.steps(self.reference, example[1])

    def named(self, example: Any) -> dict[str, np.ndarray]:
        return {"src": np.asarray(example[0]), "tgt": np.asarray(example[1])}

    def padded_source(self, src: np.ndarray, filler: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(src padded to max_len with `filler` ids instead of zeros, validity mask) [B, N] each."""
        n = self.session.max_len
        padded = np.array(filler[:, :n], dtype=np.int64)  # [B, N]
        padded[:, : src.shape[1]] = src
        valid = np.zeros((self.batch, n), dtype=np.bool_)
        valid[:, : src.shape[1]] = True
        return padded, valid


class SsmArtifact(ArtifactModel):
    """kind "ssm": model.onnx (a Scan over the step) and step.onnx over one fixed-size state; no
    max_len limit, so sequences run up to max_t positions whatever the artifact's max_len. The
    tolerance is the export's formula at the longest length run (export/ssm_graphs.py)."""

    def __post_init__(self) -> None:
        # lazily: export.ssm_graphs imports onnx (an optional dependency) at its top
        from tickformer.export.ssm_graphs import ssm_tolerance

        super().__post_init__()
        self.kind = "ssm"
        self.t_range = (1, self.max_t)
        self.tolerance = ssm_tolerance(self.config.replace(max_len=max(self.session.max_len, self.max_t)))


ARTIFACT_KINDS: dict[str, type[ArtifactModel]] = {
    "decoder": DecoderArtifact,
    "encoder-decoder": Seq2SeqArtifact,
    "ssm": SsmArtifact,
    "windowed": WindowedArtifact,
}


def open_artifact_model(path: Path, backend: str, max_t: int, trust: Path | None) -> ArtifactModel:
    """The ArtifactModel class of the artifact's kind (refused with the kinds verify knows)."""
    art = open_artifact(path, trust=trust)  # hashes (and signature) checked before anything runs
    kind = artifact_kind(art.config)
    cls = ARTIFACT_KINDS.get(kind)
    if cls is None:
        raise ArtifactError(
            f"{path}: verify does not know artifact kind {kind!r} yet (it knows {sorted(ARTIFACT_KINDS)}); "
            "use a tickformer with its properties, or verify its graphs as bare ONNX models"
        )
    return cls(path, backend, max_t, trust)


def open_model(
    path: str | Path,
    backend: str = "ort",
    max_t: int = 16,
    *,
    trust: Path | None = None,
    spec: str | Path | None = None,
    flags: Any = None,
) -> ForeignModel | ArtifactModel:
    """An artifact directory or a .onnx file; sequences of 1..max_t positions (fewer if the
    graph's length is static or the artifact's max_len is smaller). A directory is read only
    through the artifact loader (`trust`: the signing key it must carry); a bare file is read
    once (no links followed) before onnxruntime parses it; `spec` and `flags` (the command
    line's --step, --domain, --vocab, --output-bound, ...) describe a bare model."""
    if not isinstance(max_t, int) or isinstance(max_t, bool) or max_t < 1:
        raise ConfigError(f"--max-t {max_t!r} must be a positive integer")
    p = Path(path)
    try:
        is_dir = p.is_dir()
        exists = is_dir or p.exists()
    except OSError as exc:
        raise ArtifactError(
            f"{str(p)[:200]}: {exc.strerror}; pass an artifact directory or a .onnx file"
        ) from None
    if is_dir:
        if spec is not None or (flags is not None and getattr(flags, "step", None) is not None):
            raise ConfigError(
                f"--spec and --step describe bare ONNX models; {p} is an artifact directory, whose manifest "
                "declares everything: remove them"
            )
        return open_artifact_model(p, backend, max_t, trust)
    if not exists:
        raise ArtifactError(f"{p} does not exist; pass an artifact directory or a .onnx file")
    if trust is not None:
        raise ConfigError(
            f"--trust applies to signed artifacts; {p} is a bare .onnx file, which carries no signature"
        )
    return ForeignModel(p, backend, max_t, spec=spec, flags=flags)
