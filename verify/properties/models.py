"""What `tickformer verify` runs: a bare ONNX file ([B, T, F] float -> [B, T, G] float) under a real
ONNX Runtime session, or one of our artifacts through `tickformer.runtime` sessions.

Loaders only validate and store; nothing here is real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tickformer.errors import ArtifactError, BackendUnavailable, ConfigError

FLOAT_TYPES = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64}
PROVIDERS = {
    "ort": "CPUExecutionProvider",
    "ort-cuda": "CUDAExecutionProvider",
    "ort-trt": "TensorrtExecutionProvider",
}


def _dim(d: Any) -> int | None:
    return d if isinstance(d, int) and d > 0 else None


@dataclass
class OnnxModel:
    """A bare ONNX graph with exactly one float input [B, T, F] and one float output [B, T, G]."""

    path: Path
    backend: str = "ort"
    max_t: int = 16
    kind: str = field(default="onnx", init=False)

    def __post_init__(self) -> None:
        try:
            import onnxruntime as ort
        except ImportError:
            raise BackendUnavailable("onnxruntime is not installed; pip install 'tickformer[cpu]'") from None
        if self.backend not in PROVIDERS:
            raise ConfigError(f"--backend {self.backend!r} is not one of {sorted(PROVIDERS)}")
        provider = PROVIDERS[self.backend]
        if provider not in ort.get_available_providers():
            raise BackendUnavailable(
                f"backend {self.backend} needs {provider}, not available here (available: "
                f"{ort.get_available_providers()}); use --backend ort"
            )
        from tickformer.errors import FileRefused
        from tickformer.export.ort_session import make_session
        from tickformer.safe_files import read_path

        try:
            data = read_path(self.path)  # a regular file, read once (a FIFO never blocks)
        except FileRefused as exc:
            raise ArtifactError(f"{exc}; pass a .onnx file or an artifact directory") from None
        try:
            self.session = make_session(data, providers=[provider])
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            raise ArtifactError(
                f"{self.path}: onnxruntime cannot load it: {str(exc).splitlines()[0]}"
            ) from None
        ins, outs = self.session.get_inputs(), self.session.get_outputs()
        if len(ins) != 1 or len(outs) != 1:
            raise ArtifactError(
                f"{self.path}: verify needs exactly one input [B, T, F] and one output [B, T, G]; "
                f"this graph has inputs {[i.name for i in ins]} and outputs {[o.name for o in outs]}"
            )
        i, o = ins[0], outs[0]
        if i.type not in FLOAT_TYPES or o.type not in FLOAT_TYPES or len(i.shape) != 3 or len(o.shape) != 3:
            raise ArtifactError(
                f"{self.path}: input {i.name} {i.type} {i.shape} / output {o.name} {o.type} {o.shape} "
                "must both be float tensors of rank 3 [B, T, *]"
            )
        self.input_name, self.output_name = i.name, o.name
        self.dtype = FLOAT_TYPES[i.type]
        b, t, f = (_dim(d) for d in i.shape)
        if f is None:
            raise ArtifactError(
                f"{self.path}: the feature dimension of input {i.name} {i.shape} must be static"
            )
        self.batch = b if b is not None else 1
        self.features = f
        self.t_range = (t, t) if t is not None else (1, self.max_t)
        self.domain: tuple[float, float] | None = None
        self.tolerance: dict[str, float] | None = None

    def full(self, x: np.ndarray) -> np.ndarray:
        """x [B, T, F] -> y [B, T, G] through onnxruntime."""
        return np.asarray(
            self.session.run([self.output_name], {self.input_name: x.astype(self.dtype, copy=False)})[0]
        )

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": str(self.path),
            "backend": self.backend,
            "input": [self.batch, list(self.t_range), self.features],
            "dtype": np.dtype(self.dtype).name,
        }

    def close(self) -> None:
        pass


@dataclass
class ArtifactModel:
    """One of our artifacts (a directory with manifest.json): sessions of `tickformer.runtime`
    on the chosen backend plus a numpy-backend reference session."""

    path: Path
    backend: str = "ort"
    max_t: int = 16
    trust: Path | None = None
    kind: str = field(default="artifact", init=False)

    def __post_init__(self) -> None:
        from tickformer import runtime

        self.session = runtime.load(self.path, backend=self.backend, trust=self.trust)
        try:
            self.reference = runtime.load(self.path, backend="numpy", trust=self.trust)
        except BaseException:
            self.session.close()
            raise
        cfg = self.session.config
        if cfg.arch != "decoder" or cfg.inputs != "continuous":
            self.close()
            raise ArtifactError(
                f"{self.path}: verify checks continuous decoder-only artifacts (float [B, T, d_in] input); "
                f"this one is {cfg.arch} with {cfg.inputs} inputs"
            )
        self.batch = self.session.batch
        self.features = cfg.d_in
        self.dtype = np.float32
        self.t_range = (1, min(self.session.max_len, self.max_t))
        self.domain = tuple(self.session.domain)
        self.tolerance = dict(self.session.artifact.tolerance)

    def full(self, x: np.ndarray) -> np.ndarray:
        return self.session.run(np.ascontiguousarray(x, np.float32))

    def steps(self, session: Any, x: np.ndarray) -> np.ndarray:
        """Step `session` through x [B, T, d_in] from its current position -> [B, T, d_out]."""
        out = [
            session.step(np.ascontiguousarray(x[:, t : t + 1])).copy() for t in range(x.shape[1])
        ]  # T x [B, 1, G]
        return np.concatenate(out, axis=1)  # [B, T, G]

    def describe(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "path": str(self.path),
            "backend": self.backend,
            "input": [self.batch, list(self.t_range), self.features],
            "dtype": "float32",
        }

    def close(self) -> None:
        for s in (self.session, self.reference):
            s.close()


def open_model(
    path: str | Path, backend: str = "ort", max_t: int = 16, *, trust: Path | None = None
) -> OnnxModel | ArtifactModel:
    """An artifact directory or a .onnx file; sequences of 1..max_t positions (fewer if the
    graph's length is static or the artifact's max_len is smaller). A directory is read only
    through the artifact loader (`tickformer.runtime.load`; `trust`: the signing key it must
    carry); a bare file is read once (no links followed) before onnxruntime parses it."""
    if not isinstance(max_t, int) or max_t < 1:
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
        return ArtifactModel(p, backend, max_t, trust)
    if not exists:
        raise ArtifactError(f"{p} does not exist; pass an artifact directory or a .onnx file")
    if trust is not None:
        raise ConfigError(
            f"--trust applies to signed artifacts; {p} is a bare .onnx file, which carries no signature"
        )
    return OnnxModel(p, backend, max_t)
