"""ONNX Runtime on the GPU: `ort-cuda` (CUDA execution provider) and `ort-trt` (TensorRT EP).

The step graph runs with device-side IOBinding: every device buffer is a CUDA `OrtValue`
allocated once (`OrtValue.ortvalue_from_numpy(..., "cuda", device)`) and bound once, the KV cache
included, so the cache never leaves the GPU. The cache is kept stacked, K transposed
[L, B, H, dh, N] (the step graph's k_cache.i layout) and V [L, B, H, N, dh], and so are the
staged rows k_new, v_new [L, B, H, 1, dh] (and cross K/V); the step graph takes one tensor per
layer (format 2, `tickformer.artifact.format.step_signature`), so layer i's k_cache.i,
k_new.i, ... are bound by address to slice i of their stack (`bind_input` / `bind_output` at
base + i * pitch; the pitch is the slice rounded up to 256 bytes, `layout.layer_pitch`: the
TensorRT EP hands these addresses to TensorRT, which requires 256-byte alignment). x and y live
in the session's layout [B, 1, d_in] / [B, 1, d_out] and are bound with the graph's
[B, d_in] / [B, d_out] shape (same memory). A step copies x and pos into their device values
in place (`update_inplace`, same address), then `synchronize_inputs()`, `run_with_iobinding`,
`synchronize_outputs()`, and copies y back. ONNX Runtime's run synchronises its stream at its end
by default (run option `disable_synchronize_execution_providers` = 0) and ORT documents no stream
for `update_inplace` / `numpy()`, so the two explicit synchronisations are what this code relies
on: the uploads are complete before the run reads them, and the run (y, k_new, v_new) is
complete before y is read or `commit` copies the staged rows. With
`cuda_graph=True` the provider captures the step into a CUDA graph and replays it (CUDA EP: provider option
`enable_cuda_graph`; TensorRT EP: `trt_cuda_graph_enable`), which requires exactly this: fixed
device addresses for every input and output, and every node placed on the GPU provider. If the
session cannot be created with graph capture (e.g. ORT leaves a shape node on the CPU), the
backend builds it without, sets `self.cuda_graph = False` and `self.cuda_graph_reason`, and warns.

`commit(pos)` writes k_new into K column pos and v_new into V row pos: on the device with
fixed-size strided `cudaMemcpy2DAsync`s (`layout.commit_copies`: one per cache, or one per layer
when a layer slice is padded) on a non-blocking stream of this backend's own, which it
synchronises before returning, when cuda-python is installed (`self.commit_mode == "device"`):
the copies start after the step's run is complete (its `synchronize_outputs`) and are complete
before the next run is enqueued, whatever stream ORT uses (a synchronous device-to-device
`cudaMemcpy2D` would do neither: it does not wait on the host, and the legacy default stream it
runs on is not ordered against ORT's non-blocking stream);
else through a host mirror of the cache and one fixed-size `update_inplace` per cache
(`"host-mirror"`: the same cost at every position, but a full-cache copy). Either way the step
itself never writes the cache. `cache()` returns the logical [L, B, H, N, dh] (K transposed back).

Loading (not real-time), as the CPU backend (runtime/backends/ort.py): each graph's bytes are
read once and hash-checked (`runtime.artifact.verified_graph_bytes`), those bytes -- never the
path -- go to `InferenceSession`, and the session's signature must equal the manifest's graph
spec (`check_signature`, ArtifactError otherwise) before anything is bound.

`ort-trt` keeps TensorRT's engine cache and timing cache inside the artifact (ART/ort-trt-cache/,
options trt_engine_cache_enable/_path, trt_timing_cache_enable/_path); ONNX Runtime names the
cached engines by a hash of the graph (its input and node-output names, not its weights; the
graph is given as bytes, so no file name enters it) and checks them itself -- they are not
manifest-hashed files (the `tensorrt` backend's engines are). Only the cache *folders* are paths;
the model is bytes. Full-pass profile: T pinned to 1..max_len via
trt_profile_min/opt/max_shapes. TF32: the CUDA EP gets use_tf32=0 (fp32 means fp32); the
TensorRT EP exposes no TF32 switch in the options used here, so `ort-trt` fp32 results are
compared with the TF32-level bound (same unit roundoff as fp16, 2^-11) in the GPU tests.

ssm artifacts (`OrtCudaSsmBackend`, `OrtTensorRTSsmBackend`; docs/ssm.md). The state is
double-buffered on the device as on the host (runtime/backends/ssm.py): two device values
[B, L, D, N] at fixed addresses; the step at position p reads buffer p & 1 and writes the other,
so the commit is the session's position store alone and a failed step leaves the state as it
was. A CUDA graph replays fixed addresses, so each parity has its own step session and
IOBinding (x and y shared, the two state values swapped), each capturing its own graph (ORT
documents one graph per session unless the run option `gpu_graph_id` annotates several, which
the TensorRT EP does not document; two sessions need neither). The full pass is the Scan graph
on a third session without a graph (ORT's CUDA graphs do not capture control flow); on ort-trt
its profile covers T in 1..max_len and a longer T is refused in one line (`_check_full_length`,
the attention full pass too). `reset` (a memset of buffer 0), `commit_candidate` (peek: the
B - 1 other rows of the staged buffer copied from row i) and the state reads (`state`,
`staged_state`: into host arrays made at load) run on this backend's own non-blocking stream and
synchronise it before returning, after ORT's run is complete (`step` synchronised its outputs):
the same ordering argument as the attention commit. Without cuda-python they go through the
host (`commit_mode == "host"`: a fixed-size upload of zeros made at load; peek's commit a round
trip that allocates). fp16 is refused for ssm artifacts (the fp16 policy covers attention graphs).

Real-time: after the constructor's warm-up runs, `step` allocates one small array per call (the
y copy from `OrtValue.numpy()`), `commit` none on the device path. Not real-time: everything else.
Sources (facts only): ONNX Runtime Python API (IOBinding incl. synchronize_inputs/_outputs,
OrtValue), onnxruntime_run_options_config_keys.h (disable_synchronize_execution_providers), "CUDA
Execution Provider" and "TensorRT Execution Provider" docs (provider options, CUDA graphs, EP
caches); CUDA Runtime API "API synchronization behavior" (cudaMemcpy device to device).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tickformer import validation
from tickformer.artifact import format as fmt
from tickformer.artifact.format import ORT_TRT_CACHE, io_names, step_signature
from tickformer.artifact.reader import Artifact, verified_graph_bytes
from tickformer.errors import BackendError, BackendUnavailable
from tickformer.export.ort_session import session_options

from .base import Backend
from .layout import commit_copies, commit_rows, layer_pitch, stacked_shapes
from .ssm import DeviceSsmBackend

_DEVICE = "cuda"


def _ort() -> Any:
    try:
        import onnxruntime as ort
    except ImportError:
        raise BackendUnavailable(
            "onnxruntime is not installed: pip install 'tickformer[gpu]' (onnxruntime-gpu)"
        ) from None
    return ort


class _OrtGpu:
    """What every ONNX Runtime GPU backend shares (attention and ssm, CUDA and TensorRT EPs): the
    provider check, sessions over the verified graph bytes with their signature checked, the
    step session with CUDA-graph capture or its stated fallback, device values, cuda-python."""

    name: ClassVar[str]
    provider: ClassVar[str] = "CUDAExecutionProvider"
    artifact: Artifact
    config: Any
    cuda_graph: bool
    cuda_graph_reason: str

    def _open_ort(self, device_id: int, precision: str | None, workspace_mib: int) -> None:
        """Validate the options, import onnxruntime, require this backend's provider."""
        validation.nonneg_int(device_id, "device_id")
        validation.one_of(precision, "precision", (None, "fp32", "fp16"))
        ort = _ort()
        available = ort.get_available_providers()
        if self.provider not in available:
            raise BackendUnavailable(
                f"backend {self.name!r} needs onnxruntime's {self.provider}, which this onnxruntime does not have "
                f"(available: {available}); install onnxruntime-gpu on a machine with an NVIDIA GPU: "
                "pip install 'tickformer[gpu]'"
            )
        self._ort = ort
        self.device_id, self.precision, self.workspace_mib = device_id, precision, workspace_mib
        self._opts = session_options(1)
        self.cuda_graph, self.cuda_graph_reason = False, "disabled by option"

    def _check_full_length(self, t: int) -> None:
        """The full pass takes any T on the CUDA EP (the TensorRT EP's profile bounds it)."""

    # --- construction (not real-time) -----------------------------------------------------------
    def _provider_options(self, cuda_graph: bool, graph: str) -> list[Any]:
        # use_tf32 = 0: fp32 MatMul/Conv stay fp32 (TF32 rounds inputs to 10 mantissa bits, u = 2^-11).
        cuda = {
            "device_id": str(self.device_id),
            "enable_cuda_graph": "1" if cuda_graph else "0",
            "use_tf32": "0",
        }
        return [(self.provider, cuda)]

    def _session(self, graph: str, *, cuda_graph: bool) -> Any:
        """A session over the verified bytes of `graph`, its signature checked (module docstring)."""
        from .ort import check_signature

        path = self.artifact.graph_path(graph)
        data = verified_graph_bytes(self.artifact, graph)  # read once, hashed, no external data
        try:
            sess = self._ort.InferenceSession(
                data, sess_options=self._opts, providers=self._provider_options(cuda_graph, graph)
            )
        except Exception as exc:  # ORT raises its own pybind exception types
            text = str(exc)
            if "CUDA" in text and (
                "no CUDA-capable device" in text or "cudaErrorNoDevice" in text or "driver" in text.lower()
            ):
                raise BackendUnavailable(
                    f"backend {self.name!r}: no usable CUDA GPU ({text.splitlines()[0]})"
                ) from None
            raise BackendError(f"onnxruntime cannot load {path} on {self.provider}: {text}") from exc
        if sess.get_providers()[0] != self.provider:
            raise BackendUnavailable(
                f"backend {self.name!r}: onnxruntime fell back to {sess.get_providers()} "
                f"(is a GPU visible and CUDA installed?)"
            )
        check_signature(sess, self.artifact.graph_spec(graph), str(path))
        return sess

    def _step_session(self, cuda_graph: bool) -> Any:
        if not cuda_graph:
            return self._session("step", cuda_graph=False)
        try:
            sess = self._session("step", cuda_graph=True)
            self.cuda_graph, self.cuda_graph_reason = True, "captured by the provider during warm-up"
            return sess
        except (BackendError, BackendUnavailable) as exc:
            if isinstance(exc, BackendUnavailable):
                raise
            self.cuda_graph_reason = (
                f"CUDA-graph capture unavailable ({str(exc).splitlines()[0]}); using plain runs"
            )
            warnings.warn(f"{self.name} backend: {self.cuda_graph_reason}", RuntimeWarning, stacklevel=3)
            return self._session("step", cuda_graph=False)

    def _device_zeros(self, shape: tuple[int, ...], dtype: Any) -> Any:
        return self._ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, dtype=dtype), _DEVICE, self.device_id)

    @staticmethod
    def _try_cudart() -> Any:
        try:
            from .cuda import require_cudart

            return require_cudart()
        except BackendUnavailable:
            return None


class OrtCudaBackend(_OrtGpu, Backend):
    """ONNX Runtime, CUDA execution provider, device-side IOBinding, optional CUDA graph."""

    name = "ort-cuda"
    static_cache = True
    ring_cache = True  # commit writes row ring_slot(pos, W) (layout.commit_rows)

    def __init__(
        self,
        artifact: Artifact,
        *,
        device_id: int = 0,
        cuda_graph: bool = True,
        precision: str | None = None,
        workspace_mib: int = 1024,
    ) -> None:
        super().__init__(artifact)
        self._open_ort(device_id, precision, workspace_mib)
        cfg, batch = self.config, artifact.batch
        self._in_name, self._out_name = io_names(cfg)
        self._step = self._step_session(cuda_graph)
        self._aux = self._session("model" if cfg.arch == "decoder" else "encoder", cuda_graph=False)
        # Host staging and device values, allocated once. x, pos, y in the session's layout; the
        # caches, staged rows (and cross K/V) stacked over layers [L, ...], one value each.
        x_shape, x_dtype = (
            ((batch, 1), np.int64) if cfg.inputs == "tokens" else ((batch, 1, cfg.d_in), np.float32)
        )
        self._x = np.zeros(x_shape, dtype=x_dtype)
        self._pos = np.zeros(1, dtype=np.int64)
        self._y = np.zeros(self.step_output_shape, dtype=np.float32)  # [B, 1, d_out | V]
        values: dict[str, tuple[tuple[int, ...], Any]] = {
            self._in_name: (x_shape, x_dtype),
            "pos": ((1,), np.int64),
            self._out_name: (self.step_output_shape, np.float32),
        }
        if cfg.arch == "encoder-decoder":
            values["src_valid"] = ((batch, cfg.max_len), np.bool_)
        stacks = stacked_shapes(self.cache_shape, self.row_shape, cross=cfg.arch == "encoder-decoder")
        self._stacks = stacks  # name -> stored shape [L, B, H, N | 1, dh] ([L, B, H, dh, N] for k_cache)
        self._pitch = {name: layer_pitch(shape) for name, shape in stacks.items()}  # (slice, pitch) bytes
        for name, (_, pitch) in self._pitch.items():  # stored [L, pitch / 4] float32: layer i at i * pitch
            values[name] = ((cfg.n_layers, pitch // 4), np.float32)
        self._vals = {name: self._device_zeros(shape, dtype) for name, (shape, dtype) in values.items()}
        # Every step input and output -> (value it lives in, byte offset).
        where: dict[str, tuple[str, int]] = {name: (name, 0) for name in values if name not in stacks}
        for stack, (_, pitch) in self._pitch.items():
            where.update({f"{stack}.{i}": (stack, i * pitch) for i in range(cfg.n_layers)})
        sig = step_signature(cfg, batch)
        self._io = self._step.io_binding()
        try:
            for key, bind in (("inputs", self._io.bind_input), ("outputs", self._io.bind_output)):
                for name, (dtype, shape) in sig[key].items():
                    value, offset = where[name]
                    bind(
                        name,
                        _DEVICE,
                        self.device_id,
                        np.dtype(dtype),
                        list(shape),
                        self._vals[value].data_ptr() + offset,
                    )
        except Exception as exc:  # signatures were checked when the session was made: an engine-side failure
            raise BackendError(f"{self.name} cannot bind the step buffers: {exc}") from exc
        self._cudart = self._try_cudart()
        self.commit_mode = "device" if self._cudart is not None else "host-mirror"
        self._copy_stream: Any = None
        if self._cudart is not None:  # commit's own stream (module docstring: ordering)
            from .cuda import cuda_check

            c = self._cudart
            self._copy_stream = cuda_check(
                c.cudaStreamCreateWithFlags(c.cudaStreamNonBlocking), "cudaStreamCreateWithFlags"
            )
        # Device commit: (dst, dpitch, src, spitch, width, height) at position 0; pos adds pos * width.
        self._rows = commit_rows(self.cache_shape[3], self.config.window)  # commit(pos) -> cache row
        self._commit_ops = commit_copies(
            {name: self._vals[name].data_ptr() for name in stacks}, self._pitch, self.cache_shape
        )
        self._mirror = (
            None if self._cudart is not None else (self._padded("k_cache"), self._padded("v_cache"))
        )
        for _ in range(3):  # warm-up; with cuda_graph the provider captures during these runs
            self._run_step()

    def _padded(self, name: str, logical: np.ndarray | None = None) -> np.ndarray:
        """A host array in stack `name`'s device layout [L, pitch / 4], zero or holding `logical`."""
        slice_bytes, pitch = self._pitch[name]
        out = np.zeros((self.config.n_layers, pitch // 4), np.float32)
        if logical is not None:
            out[:, : slice_bytes // 4] = logical.reshape(self.config.n_layers, -1)
        return out

    def _logical(self, name: str, padded: np.ndarray) -> np.ndarray:
        """View of a [L, pitch / 4] array as stack `name`'s stored shape (no copy): [L, B, H, N | 1, dh],
        [L, B, H, dh, N] for k_cache."""
        return padded[:, : self._pitch[name][0] // 4].reshape(self._stacks[name])

    def _run_step(self) -> None:
        """One run of the step graph, complete on return (module docstring: ordering)."""
        self._io.synchronize_inputs()  # the in-place uploads of x and pos have landed
        self._step.run_with_iobinding(self._io)
        self._io.synchronize_outputs()  # y, k_new, v_new are written

    # --- real-time path -------------------------------------------------------------------------
    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Real-time after warm-up (module docstring). Never writes the cache."""
        np.copyto(self._x, x)
        self._pos[0] = pos
        try:
            self._vals[self._in_name].update_inplace(self._x)  # same device address: graph replay sees it
            self._vals["pos"].update_inplace(self._pos)
            self._run_step()
            np.copyto(self._y, self._vals[self._out_name].numpy())
        except Exception as exc:
            raise BackendError(f"{self.name} step failed at position {pos}: {exc}") from exc
        return self._y

    def commit(self, pos: int) -> None:
        """Device path: fixed-size strided device copies (module docstring). Host-mirror path: a
        column (K) / row (V) write and a fixed-size upload per cache."""
        if self._cudart is not None:
            from .cuda import cuda_check

            c, stream = self._cudart, self._copy_stream
            kind = c.cudaMemcpyKind.cudaMemcpyDeviceToDevice
            row = self._rows[pos]  # pos itself, or ring_slot(pos, W) (layout.commit_rows)
            for dst, dpitch, src, spitch, width, height in self._commit_ops:
                cuda_check(
                    c.cudaMemcpy2DAsync(dst + row * width, dpitch, src, spitch, width, height, kind, stream),
                    "cudaMemcpy2DAsync commit",
                )
            cuda_check(c.cudaStreamSynchronize(stream), "cudaStreamSynchronize commit")
            return
        assert self._mirror is not None
        k_host, v_host = self._mirror
        row = self._rows[pos]
        self._logical("k_cache", k_host)[..., row] = self._logical("k_new", self._vals["k_new"].numpy())[
            :, :, :, 0
        ]  # [L, B, H, dh]
        self._logical("v_cache", v_host)[:, :, :, row] = self._logical("v_new", self._vals["v_new"].numpy())[
            :, :, :, 0
        ]
        self._vals["k_cache"].update_inplace(k_host)
        self._vals["v_cache"].update_inplace(v_host)

    # --- not real-time --------------------------------------------------------------------------
    def full(self, x: np.ndarray) -> np.ndarray:
        if self.config.arch != "decoder":
            raise BackendError("this artifact has no full-pass graph (encoder-decoder); use generate()")
        self._check_full_length(x.shape[1])
        try:
            return self._aux.run(None, {self._in_name: x})[0]
        except Exception as exc:
            raise BackendError(f"{self.name} full pass failed: {exc}") from exc

    def set_source(self, src: np.ndarray, src_valid: np.ndarray) -> None:
        if self.config.arch != "encoder-decoder":
            raise NotImplementedError("decoder-only artifacts have no source")
        try:
            cross_k, cross_v = self._aux.run(["cross_k", "cross_v"], {"src": src, "src_valid": src_valid})
        except Exception as exc:
            raise BackendError(f"{self.name} encoder failed: {exc}") from exc
        self._vals["cross_k"].update_inplace(self._padded("cross_k", cross_k))  # into the layer-padded layout
        self._vals["cross_v"].update_inplace(self._padded("cross_v", cross_v))
        self._vals["src_valid"].update_inplace(np.ascontiguousarray(src_valid, dtype=np.bool_))

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        """(k, v), each [L, B, H, N, dh] (the logical layout, as every backend): K is transposed back."""
        k_t = self._logical("k_cache", self._vals["k_cache"].numpy())  # [L, B, H, dh, N]
        v = self._logical("v_cache", self._vals["v_cache"].numpy())
        return np.ascontiguousarray(k_t.swapaxes(-1, -2)), np.ascontiguousarray(v)

    def close(self) -> None:
        """Drop the binding, values and sessions, and destroy commit's stream. Idempotent."""
        stream, self._copy_stream = getattr(self, "_copy_stream", None), None
        cudart = getattr(self, "_cudart", None)
        if stream is not None and cudart is not None:
            cudart.cudaStreamDestroy(stream)
        self._io = None
        self._vals = {}
        self._step = self._aux = None


class _OrtTrtOptions(_OrtGpu):
    """The TensorRT EP's provider options (module docstring): engine and timing caches in the
    artifact, the full pass's profile T in 1..max_len, and the length check that goes with it."""

    provider = "TensorrtExecutionProvider"

    def _check_full_length(self, t: int) -> None:
        """The full-pass engine's profile covers T <= max_len: a longer T is refused here, in one
        line, instead of failing inside the engine."""
        if t > self.artifact.max_len:
            raise BackendError(
                f"backend {self.name!r}: the TensorRT EP's profile for model.onnx covers T <= max_len "
                f"{self.artifact.max_len}, got T = {t}; stream it with step(), or run the full pass on "
                "backend ort-cuda or ort"
            )

    def _provider_options(self, cuda_graph: bool, graph: str) -> list[Any]:
        cache_dir = Path(self.artifact.root) / ORT_TRT_CACHE
        cache_dir.mkdir(exist_ok=True)
        trt: dict[str, Any] = {
            "device_id": str(self.device_id),
            "trt_max_workspace_size": str(self.workspace_mib << 20),
            "trt_fp16_enable": "True" if self.precision == "fp16" else "False",
            "trt_engine_cache_enable": "True",
            "trt_engine_cache_path": str(cache_dir),
            "trt_timing_cache_enable": "True",
            "trt_timing_cache_path": str(cache_dir),
            "trt_cuda_graph_enable": "True" if cuda_graph else "False",
        }
        spec = self.artifact.graph_spec(graph)
        dynamic = [i for i in spec["inputs"] if any(not isinstance(d, int) for d in i["shape"])]
        if dynamic:  # the full pass: T in 1..max_len, optimised at max_len

            def shapes(t: int) -> str:
                return ",".join(
                    f"{i['name']}:" + "x".join(str(t if d == "T" else d) for d in i["shape"]) for i in dynamic
                )

            trt.update(
                {
                    "trt_profile_min_shapes": shapes(1),
                    "trt_profile_opt_shapes": shapes(self.artifact.max_len),
                    "trt_profile_max_shapes": shapes(self.artifact.max_len),
                }
            )
        cuda = {"device_id": str(self.device_id), "use_tf32": "0"}
        return [(self.provider, trt), ("CUDAExecutionProvider", cuda)]


class OrtTensorRTBackend(_OrtTrtOptions, OrtCudaBackend):
    """ONNX Runtime, TensorRT execution provider (CUDA EP for anything TensorRT does not take),
    engine and timing caches in the artifact."""

    name = "ort-trt"


class OrtCudaSsmBackend(_OrtGpu, DeviceSsmBackend):
    """An ssm artifact on ONNX Runtime's CUDA EP (module docstring, "ssm artifacts"): the two
    state buffers on the device, one step session and binding per parity, optional CUDA graphs."""

    name = "ort-cuda"
    supports_peek = True  # commit_candidate: the B - 1 device row copies

    def __init__(
        self,
        artifact: Artifact,
        *,
        device_id: int = 0,
        cuda_graph: bool = True,
        precision: str | None = None,
        workspace_mib: int = 1024,
    ) -> None:
        super().__init__(artifact)
        self._open_ort(device_id, precision, workspace_mib)
        if precision == "fp16":
            raise BackendError(
                f"backend {self.name!r}: precision 'fp16' is not available for ssm artifacts (the fp16 policy "
                "covers attention graphs, docs/ssm.md); leave precision unset (fp32)"
            )
        cfg, batch = self.config, artifact.batch
        self._in_name, self._out_name = io_names(cfg)
        # One step session per parity (each captures its own CUDA graph over its own addresses),
        # and the full pass (Scan) without a graph.
        self._steps = [self._step_session(cuda_graph) for _ in (0, 1)]
        self._aux = self._session("model", cuda_graph=False)
        x_shape, x_dtype = (
            ((batch, 1), np.int64) if cfg.inputs == "tokens" else ((batch, 1, cfg.d_in), np.float32)
        )
        self._x = np.zeros(x_shape, dtype=x_dtype)  # host staging of x, the session's layout
        self._x_val = self._device_zeros(x_shape, x_dtype)
        self._y_val = self._device_zeros(self.step_output_shape, np.float32)
        self._state_vals = [self._device_zeros(self.state_shape, np.float32) for _ in (0, 1)]
        self._state_bytes = int(np.prod(self.state_shape)) * 4
        self._ios = []
        sig = fmt.ssm_step_signature(cfg, batch)
        try:
            for parity, session in enumerate(self._steps):
                io = session.io_binding()
                value = {
                    self._in_name: self._x_val,
                    fmt.SSM_STATE: self._state_vals[parity],
                    self._out_name: self._y_val,
                    fmt.SSM_STATE_NEW: self._state_vals[1 - parity],
                }
                for key, bind in (("inputs", io.bind_input), ("outputs", io.bind_output)):
                    for name, (dtype, shape) in sig[key].items():
                        bind(
                            name,
                            _DEVICE,
                            self.device_id,
                            np.dtype(dtype),
                            list(shape),
                            value[name].data_ptr(),
                        )
                self._ios.append(io)
        except Exception as exc:  # signatures were checked when the sessions were made: engine-side
            raise BackendError(f"{self.name} cannot bind the ssm step buffers: {exc}") from exc
        # Host buffers the device state is read into (state(), staged_state()), made once.
        self._read = (np.zeros(self.state_shape, np.float32), np.zeros(self.state_shape, np.float32))
        self._zeros = np.zeros(self.state_shape, np.float32)
        self._cudart = self._try_cudart()
        self.commit_mode = "device" if self._cudart is not None else "host"
        self._copy_stream: Any = None
        self._cand: list[list[list[tuple[int, int]]]] = []
        if self._cudart is not None:  # reset, peek commit and state reads on a stream of our own
            from .cuda import cuda_check

            c = self._cudart
            self._copy_stream = cuda_check(
                c.cudaStreamCreateWithFlags(c.cudaStreamNonBlocking), "cudaStreamCreateWithFlags"
            )
            row = self._state_bytes // batch  # one batch row [L, D, N], contiguous
            for parity in (0, 1):  # (dst, src) of the B - 1 row copies of commit_candidate(pos, i)
                staged = self._state_vals[1 - parity].data_ptr()
                self._cand.append(
                    [
                        [(staged + b * row, staged + i * row) for b in range(batch) if b != i]
                        for i in range(batch)
                    ]
                )
            self._row_bytes = row
        for parity in (0, 1):  # warm-up; with cuda_graph the provider captures during these runs
            for _ in range(3):
                self._run_step(parity)
        self.reset()

    def _run_step(self, parity: int) -> None:
        """One run of parity's step session, complete on return (as OrtCudaBackend._run_step)."""
        io = self._ios[parity]
        io.synchronize_inputs()  # the in-place upload of x has landed
        self._steps[parity].run_with_iobinding(io)
        io.synchronize_outputs()  # y and state_new are written

    def _sync_copies(self) -> None:
        from .cuda import cuda_check

        cuda_check(self._cudart.cudaStreamSynchronize(self._copy_stream), "cudaStreamSynchronize ssm")

    # --- real-time path -------------------------------------------------------------------------
    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Real-time after warm-up: upload x in place, run parity pos & 1 (reads buffer pos & 1,
        writes the other), copy y back (one small array from OrtValue.numpy(), as the attention
        backend). Never writes the state it reads."""
        np.copyto(self._x, x)
        try:
            self._x_val.update_inplace(self._x)  # same device address: a graph replay sees it
            self._run_step(pos & 1)
            np.copyto(self._y, self._y_val.numpy())
        except Exception as exc:
            raise BackendError(f"{self.name} ssm step failed at position {pos}: {exc}") from exc
        return self._y

    def commit_candidate(self, pos: int, i: int) -> None:
        """Candidate i's staged state over the other B - 1 rows of the staged buffer. Device path:
        B - 1 fixed-size device-to-device copies on this backend's stream, then its sync (ORT's
        run is complete: `step` synchronised its outputs). Host path: a round trip through the
        host (allocates; not real-time)."""
        if self._cudart is None:
            staged = self._state_vals[1 - (pos & 1)]
            host = staged.numpy()
            host[:] = host[i]
            staged.update_inplace(host)
            return
        from .cuda import cuda_check

        c, stream, row = self._cudart, self._copy_stream, self._row_bytes
        kind = c.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        for dst, src in self._cand[pos & 1][i]:
            cuda_check(c.cudaMemcpyAsync(dst, src, row, kind, stream), "cudaMemcpyAsync ssm candidate")
        self._sync_copies()

    def reset(self) -> None:
        """Zero buffer 0 (the one position 0 reads): a memset on this backend's stream and its
        sync (device path), or one fixed-size upload of zeros made at load. Constant time."""
        if self._cudart is None:
            self._state_vals[0].update_inplace(self._zeros)
            return
        from .cuda import cuda_check

        c = self._cudart
        cuda_check(
            c.cudaMemsetAsync(self._state_vals[0].data_ptr(), 0, self._state_bytes, self._copy_stream),
            "cudaMemsetAsync ssm reset",
        )
        self._sync_copies()

    def _read_state(self, buffer: int, out: np.ndarray) -> np.ndarray:
        """Device buffer -> the host array `out` (made at load), complete on return."""
        if self._cudart is None:
            np.copyto(out, self._state_vals[buffer].numpy())
            return out
        from .cuda import cuda_check

        c = self._cudart
        kind = c.cudaMemcpyKind.cudaMemcpyDeviceToHost
        cuda_check(
            c.cudaMemcpyAsync(
                out.ctypes.data,
                self._state_vals[buffer].data_ptr(),
                self._state_bytes,
                kind,
                self._copy_stream,
            ),
            "cudaMemcpyAsync ssm state",
        )
        self._sync_copies()
        return out

    # --- not real-time --------------------------------------------------------------------------
    def full(self, x: np.ndarray) -> np.ndarray:
        """The Scan graph on this provider (any T on the CUDA EP; T <= max_len on the TensorRT EP)."""
        self._check_full_length(x.shape[1])
        try:
            return self._aux.run(None, {self._in_name: x})[0]
        except Exception as exc:
            raise BackendError(f"{self.name} full pass failed: {exc}") from exc

    def close(self) -> None:
        """Drop the bindings, values and sessions, and destroy the copy stream. Idempotent."""
        stream, self._copy_stream = getattr(self, "_copy_stream", None), None
        cudart = getattr(self, "_cudart", None)
        if stream is not None and cudart is not None:
            cudart.cudaStreamDestroy(stream)
        self._ios = []
        self._state_vals = []
        self._steps, self._aux = [], None


class OrtTensorRTSsmBackend(_OrtTrtOptions, OrtCudaSsmBackend):
    """An ssm artifact on ONNX Runtime's TensorRT EP (CUDA EP for the rest): the step as for
    ort-cuda; the full pass (Scan) under the profile T in 1..max_len."""

    name = "ort-trt"


BACKENDS = {"ort-cuda": OrtCudaBackend, "ort-trt": OrtTensorRTBackend}
