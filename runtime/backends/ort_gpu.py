"""ONNX Runtime on the GPU: `ort-cuda` (CUDA execution provider) and `ort-trt` (TensorRT EP),
one class each for both block kinds (base.py); the state of the kind lives in a device store
(device.py: DeviceCache for attention's KV cache, DeviceState for the ssm state) shared with the
`tensorrt` backend, or goes through the host without cuda-python.

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
fixed-size strided `cudaMemcpy2DAsync`s (device.DeviceCache, `layout.commit_copies`: one per
cache, or one per layer when a layer slice is padded) on a non-blocking stream of this backend's
own, which it synchronises before returning, when cuda-python is installed (`self.commit_mode ==
"device"`):
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

ssm artifacts (docs/ssm.md). The state is double-buffered on the device as on the host
(device.DeviceState, layout.HostState): two device values
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
`staged_state`: into host arrays made at load) run on this backend's own non-blocking stream
(device.DeviceState) and synchronise it before returning, after ORT's run is complete (`step` synchronised its outputs):
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

from ..ort_session import session_options
from .base import StoreBackend
from .cuda import cuda_check
from .device import DeviceCache, DeviceState
from .layout import CacheStore, StateStore, commit_rows, layer_pitch, stack_addresses, stacked_shapes

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


class OrtCudaBackend(_OrtGpu, StoreBackend):
    """ONNX Runtime, CUDA execution provider, device-side IOBinding, optional CUDA graph; both
    block kinds (the state on the device: device.py, or through the host without cuda-python)."""

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
        ssm = self.block == "ssm"
        if ssm and precision == "fp16":
            raise BackendError(
                f"backend {self.name!r}: precision 'fp16' is not available for ssm artifacts (the fp16 policy "
                "covers attention graphs, docs/ssm.md); leave precision unset (fp32)"
            )
        self.supports_peek = ssm  # commit_candidate: the state's B - 1 row copies
        cfg, batch = self.config, artifact.batch
        self._in_name, self._out_name = io_names(cfg)
        # One step session per parity of the store (the ssm state: two, each capturing its own CUDA
        # graph over its own addresses), and the full pass (ssm: the Scan) or encoder without a graph.
        self._steps = [self._step_session(cuda_graph) for _ in range(2 if ssm else 1)]
        self._aux = self._session("model" if cfg.arch == "decoder" else "encoder", cuda_graph=False)
        # Host staging and device values, allocated once. x, pos, y in the session's layout; the
        # state of the block kind: the caches, staged rows (and cross K/V) stacked over layers
        # [L, ...], one value each, or the ssm state's two buffers.
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
        shared = list(values)
        self._stacks: dict[str, tuple[int, ...]] = {}
        self._pitch: dict[str, tuple[int, int]] = {}
        if ssm:
            values.update({f"state.{b}": (self.state_shape, np.float32) for b in (0, 1)})
        else:
            stacks = stacked_shapes(self.cache_shape, self.row_shape, cross=cfg.arch == "encoder-decoder")
            self._stacks = stacks  # name -> stored shape [L, B, H, N | 1, dh] ([L, B, H, dh, N] for k_cache)
            self._pitch = {name: layer_pitch(shape) for name, shape in stacks.items()}  # (slice, pitch) bytes
            for name, (
                _,
                pitch,
            ) in self._pitch.items():  # stored [L, pitch / 4] float32: layer i at i * pitch
                values[name] = ((cfg.n_layers, pitch // 4), np.float32)
        self._vals = {name: self._device_zeros(shape, dtype) for name, (shape, dtype) in values.items()}
        self._cudart = self._try_cudart()
        self._copy_stream: Any = None
        if self._cudart is not None:  # the store's copies on a stream of our own (module docstring: ordering)
            c = self._cudart
            self._copy_stream = cuda_check(
                c.cudaStreamCreateWithFlags(c.cudaStreamNonBlocking), "cudaStreamCreateWithFlags"
            )
        self.store = self._make_store()
        self.commit_mode = "device" if self._cudart is not None else "host" if ssm else "host-mirror"
        # Every step input and output -> its device address, per parity; bound once.
        sig = step_signature(cfg, batch)
        where = {name: self._vals[name].data_ptr() for name in shared}
        self._ios = []
        try:
            for parity, session in enumerate(self._steps):
                io = session.io_binding()
                address = {**where, **self.store.addresses(parity)}
                for key, bind in (("inputs", io.bind_input), ("outputs", io.bind_output)):
                    for name, (dtype, shape) in sig[key].items():
                        bind(name, _DEVICE, self.device_id, np.dtype(dtype), list(shape), address[name])
                self._ios.append(io)
        except (
            Exception
        ) as exc:  # signatures were checked when the sessions were made: an engine-side failure
            raise BackendError(f"{self.name} cannot bind the step buffers: {exc}") from exc
        self._parity = len(self._steps) - 1  # pos & this: the step session of pos's parity
        self._has_pos = "pos" in sig["inputs"]  # the ssm step has no position input
        for parity in range(
            len(self._steps)
        ):  # warm-up; with cuda_graph the provider captures during these runs
            for _ in range(3):
                self._run_step(parity)
        self.reset()

    def _make_store(self) -> Any:
        """The store of this block kind: on the device with cuda-python (device.py), else through
        the host (module docstring)."""
        c, stream, sync = self._cudart, self._copy_stream, self._sync_copies
        if self.block == "ssm":
            vals = (self._vals["state.0"], self._vals["state.1"])
            if c is None:
                return _HostState(vals, self.state_shape)
            read = (np.zeros(self.state_shape, np.float32), np.zeros(self.state_shape, np.float32))
            buffers = (vals[0].data_ptr(), vals[1].data_ptr())
            return DeviceState(c, stream, sync, buffers, self.state_shape, read)
        if c is None:
            return _HostMirrorCache(self)
        stacks = {name: self._vals[name].data_ptr() for name in self._stacks}
        return DeviceCache(
            c, stream, sync, stacks, self._pitch, self._stacks, self.cache_shape, self.config.window
        )

    def _sync_copies(self) -> None:
        cuda_check(self._cudart.cudaStreamSynchronize(self._copy_stream), "cudaStreamSynchronize copies")

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

    def _run_step(self, parity: int) -> None:
        """One run of the step session of this parity, complete on return (module docstring: ordering)."""
        io = self._ios[parity]
        io.synchronize_inputs()  # the in-place uploads of x (and pos) have landed
        self._steps[parity].run_with_iobinding(io)
        io.synchronize_outputs()  # y and the staged rows (ssm: state_new) are written

    # --- real-time path -------------------------------------------------------------------------
    def step(self, x: np.ndarray, pos: int) -> np.ndarray:
        """Real-time after warm-up (module docstring): upload x (and pos) in place, run the step
        session of pos's parity, copy y back. Never writes the committed state."""
        np.copyto(self._x, x)
        self._pos[0] = pos
        try:
            self._vals[self._in_name].update_inplace(self._x)  # same device address: graph replay sees it
            if self._has_pos:
                self._vals["pos"].update_inplace(self._pos)
            self._run_step(pos & self._parity)
            np.copyto(self._y, self._vals[self._out_name].numpy())
        except Exception as exc:
            raise BackendError(f"{self.name} step failed at position {pos}: {exc}") from exc
        return self._y

    # --- not real-time --------------------------------------------------------------------------
    def full(self, x: np.ndarray) -> np.ndarray:
        """The full-pass graph (ssm: the Scan) on this provider (any T on the CUDA EP; T <= max_len
        on the TensorRT EP)."""
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

    def close(self) -> None:
        """Drop the bindings, values and sessions, and destroy the copy stream. Idempotent."""
        stream, self._copy_stream = getattr(self, "_copy_stream", None), None
        cudart = getattr(self, "_cudart", None)
        if stream is not None and cudart is not None:
            cudart.cudaStreamDestroy(stream)
        self._ios = []
        self._vals = {}
        self._steps, self._aux = [], None


class _HostMirrorCache(CacheStore):
    """Attention without cuda-python: commit through a host mirror of the cache and one
    fixed-size `update_inplace` per cache (the same cost at every position, but a full-cache
    copy); `cache()` from the values' host copies."""

    def __init__(self, owner: OrtCudaBackend) -> None:
        self._owner = owner
        self._rows = commit_rows(owner.cache_shape[3], owner.config.window)  # commit(pos) -> cache row
        self._mirror = (owner._padded("k_cache"), owner._padded("v_cache"))

    def addresses(self, parity: int) -> dict[str, int]:
        o = self._owner
        base = {name: o._vals[name].data_ptr() for name in o._stacks}
        return stack_addresses(base, o._pitch, o.config.n_layers)

    def commit(self, pos: int) -> None:
        """A column (K) / row (V) write into the mirror and a fixed-size upload per cache."""
        o, (k_host, v_host) = self._owner, self._mirror
        row = self._rows[pos]
        o._logical("k_cache", k_host)[..., row] = o._logical("k_new", o._vals["k_new"].numpy())[
            :, :, :, 0
        ]  # [L, B, H, dh]
        o._logical("v_cache", v_host)[:, :, :, row] = o._logical("v_new", o._vals["v_new"].numpy())[
            :, :, :, 0
        ]
        o._vals["k_cache"].update_inplace(k_host)
        o._vals["v_cache"].update_inplace(v_host)

    def cache(self) -> tuple[np.ndarray, np.ndarray]:
        """(k, v), each [L, B, H, N, dh] (the logical layout, as every backend): K is transposed back."""
        o = self._owner
        k_t = o._logical("k_cache", o._vals["k_cache"].numpy())  # [L, B, H, dh, N]
        v = o._logical("v_cache", o._vals["v_cache"].numpy())
        return np.ascontiguousarray(k_t.swapaxes(-1, -2)), np.ascontiguousarray(v)


class _HostState(StateStore):
    """The ssm state without cuda-python: reset is one fixed-size upload of zeros made at load,
    peek's commit a round trip through the host (allocates; not real-time), the state reads
    host copies."""

    def __init__(self, vals: tuple[Any, Any], state_shape: tuple[int, ...]) -> None:
        self._vals = vals
        self._zeros = np.zeros(state_shape, np.float32)
        self._read = (np.zeros(state_shape, np.float32), np.zeros(state_shape, np.float32))

    def addresses(self, parity: int) -> dict[str, int]:
        return {
            fmt.SSM_STATE: self._vals[parity].data_ptr(),
            fmt.SSM_STATE_NEW: self._vals[1 - parity].data_ptr(),
        }

    def commit_candidate(self, pos: int, i: int) -> None:
        staged = self._vals[1 - (pos & 1)]
        host = staged.numpy()
        host[:] = host[i]
        staged.update_inplace(host)

    def reset(self) -> None:
        self._vals[0].update_inplace(self._zeros)

    def state(self, pos: int) -> np.ndarray:
        np.copyto(self._read[0], self._vals[pos & 1].numpy())
        return self._read[0]

    def staged_state(self, pos: int) -> np.ndarray:
        np.copyto(self._read[1], self._vals[1 - (pos & 1)].numpy())
        return self._read[1]


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
    engine and timing caches in the artifact; both block kinds (ssm: the full pass, the Scan,
    under the profile T in 1..max_len)."""

    name = "ort-trt"


BACKENDS = {"ort-cuda": OrtCudaBackend, "ort-trt": OrtTensorRTBackend}
