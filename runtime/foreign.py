"""Running bare ONNX models users bring (not our artifacts): ONNX Runtime sessions over the bytes
`tickformer.artifact.foreign.read_graph` read, engine errors classified, and a recurrent model
driven step by step (the step graph's present outputs fed back as its past inputs: a KV cache
that grows, or a fixed-size state such as a GRU's h).

    Graph(data, name=..., optimization="all")   one ORT session (`make_session`, the one place
                                  sessions are made); run(feeds) -> {output: array}; its
                                  RunOptions is registered with the budget in force
                                  (tickformer.runtime.budget), whose deadline terminates the run
    Reference(data, name=...)     the same interface over `onnx.reference.ReferenceEvaluator`
    EngineError                   an engine failure on given inputs, `.kind` one of
                                  "shape" (a shape or broadcast the graph cannot take: a shape
                                  contract), "index" (an index out of range), "numeric", "other";
                                  a run stopped by the deadline or out of memory raises the
                                  budget's OverBudget instead (it is no finding about the model)
    Stepper(sig, full, step)      prefill + steps of a recurrent pair, every step's feeds built from
                                  the full-sequence feeds (signature: artifact.foreign.CacheSig);
                                  an "empty" prefill steps the first positions from the reset state
    reset_state(...)              the state a step starts from: zeros, a cache of length 0
    fixed_feeds(sig, sizes, seed) deterministic in-domain feeds of given sizes
    ForeignSession                a Steppable (tickformer.runtime.steppable) over a bare model, for
                                  `certify`: the step graph with its state or cache fed back, or
                                  the full graph at one fixed shape

Not real-time code: onnxruntime allocates every output of `InferenceSession.run`, and a KV-cache
pair's step costs more as its cache grows (ForeignSession.static_cache is False for it; True for
a model whose every pair is a fixed-size state).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from tickformer.artifact.foreign.memory import check_memory
from tickformer.artifact.foreign.signature import InputSig, Signature
from tickformer.errors import BackendError, ConfigError

from .budget import active, engine_over_budget, node_of, over_budget

PROVIDERS = {
    "ort": "CPUExecutionProvider",
    "ort-cuda": "CUDAExecutionProvider",
    "ort-trt": "TensorrtExecutionProvider",
}
ENGINE_ERROR_KINDS = ("shape", "index", "numeric", "other")
_SHAPE_WORDS = re.compile(
    r"shape|dimension|broadcast|reshape|rank|size of|invalid dim|incompatible|mismatch|axis",
    re.IGNORECASE,
)
_INDEX_WORDS = re.compile(
    r"out of (data )?(bounds|range)|indices element|index .* (invalid|outside)", re.IGNORECASE
)
STATE_STEPS = 64  # positions a one-step recurrent model is stepped before a reset (certify)
_NUMERIC_WORDS = re.compile(r"division by zero|overflow|nan|floating", re.IGNORECASE)


class EngineError(BackendError):
    """The engine raised on given inputs. kind: ENGINE_ERROR_KINDS; graph: which graph."""

    kind: str = "other"
    graph: str = ""


def classify(text: str) -> str:
    """The kind of an engine error message (module docstring). An index error is tested first:
    Gather's message names the indices and the data's dimension."""
    if _INDEX_WORDS.search(text):
        return "index"
    if _SHAPE_WORDS.search(text):
        return "shape"
    if _NUMERIC_WORDS.search(text):
        return "numeric"
    return "other"


def engine_error(graph: str, exc: BaseException) -> EngineError:
    text = " ".join(str(exc).split()) or type(exc).__name__
    err = EngineError(f"{graph}: {type(exc).__name__}: {text[:400]}")
    err.kind, err.graph = classify(text), graph
    return err


def provider_of(backend: str) -> str:
    """The execution provider of a verify/certify backend name, checked against this install."""
    import onnxruntime as ort

    if backend not in PROVIDERS:
        raise ConfigError(f"--backend {backend!r} is not one of {sorted(PROVIDERS)} for a bare ONNX model")
    provider = PROVIDERS[backend]
    if provider not in ort.get_available_providers():
        from tickformer.errors import BackendUnavailable

        raise BackendUnavailable(
            f"backend {backend} needs {provider}, not available here (available: "
            f"{ort.get_available_providers()}); use --backend ort"
        )
    return provider


class Graph:
    """One ONNX Runtime session over a graph's bytes (`make_session`: one thread, deterministic)."""

    def __init__(
        self,
        data: bytes,
        *,
        name: str,
        provider: str = "CPUExecutionProvider",
        optimization: str = "all",
        threads: int = 1,
    ) -> None:
        from tickformer.errors import ArtifactError
        from tickformer.runtime.ort_session import make_session

        self.name, self.optimization = name, optimization
        try:
            self.session = make_session(
                data, threads=threads, optimization=optimization, providers=[provider]
            )
        except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
            first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise ArtifactError(
                f"{name}: onnxruntime cannot load it: {first[:300]}; pass a valid .onnx file"
            ) from None
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        import onnxruntime as ort

        self.run_options = ort.RunOptions()
        self.run_options.log_severity_level = 4  # a failing run is an EngineError, not a log line on stderr
        budget = active()
        if budget is not None:
            budget.register(self.run_options)  # its deadline terminates a run in progress

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        missing = [n for n in self.input_names if n not in feeds]
        if missing:
            raise ConfigError(
                f"{self.name}: no value for its input {missing[0]!r}; declare its role in a spec file "
                f"([inputs.{missing[0]}] role = ...)"
            )
        budget = active()
        if budget is not None:
            budget.started(self.run_options)
        try:
            outs = self.session.run(
                self.output_names, {n: feeds[n] for n in self.input_names}, self.run_options
            )
        except MemoryError:
            raise over_budget("memory", f"{self.name}") from None
        except Exception as exc:
            text = " ".join(str(exc).split())
            kind = engine_over_budget(text)
            if kind is not None:
                node = node_of(text)
                raise over_budget(kind, f"{self.name}{' at ' + node if node else ''}") from None
            raise engine_error(self.name, exc) from None
        finally:
            if budget is not None:
                budget.ended()
        return {n: np.asarray(v) for n, v in zip(self.output_names, outs)}


class Reference:
    """onnx.reference.ReferenceEvaluator (ONNX's Python implementation of every operator) with
    Graph's interface. `unsupported` is the reason it cannot run this graph, or None."""

    def __init__(self, data: bytes, *, name: str) -> None:
        import onnx

        self.name = name
        self.unsupported: str | None = None
        try:
            from onnx.reference import ReferenceEvaluator

            model = onnx.load_model_from_string(data)
            self.output_names = [o.name for o in model.graph.output]
            init = {i.name for i in model.graph.initializer}
            self.input_names = [i.name for i in model.graph.input if i.name not in init]
            self.evaluator = ReferenceEvaluator(model)
        except Exception as exc:  # an operator or domain it does not implement
            first = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            self.unsupported = f"onnx.reference cannot run {name}: {first}"

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import warnings

        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # numpy on NaN/inf: the outputs say it
                outs = self.evaluator.run(None, {n: feeds[n] for n in self.input_names})
        except MemoryError:
            raise over_budget("memory", f"{self.name} (onnx.reference)") from None
        except Exception as exc:
            raise engine_error(f"{self.name} (onnx.reference)", exc) from None
        return {n: np.asarray(v) for n, v in zip(self.output_names, outs)}


# ----------------------------------------------------------------------------- feeds


def take(x: np.ndarray, axis: int, start: int, stop: int) -> np.ndarray:
    """x[..., start:stop, ...] along `axis` (a view)."""
    index = [slice(None)] * x.ndim
    index[axis] = slice(start, stop)
    return x[tuple(index)]


def input_shape(i: InputSig, sizes: dict[str, int]) -> tuple[int, ...]:
    """The concrete shape of input i at the given group sizes (a state input: its reset state's,
    a cache of length 0 along its time axis)."""
    out = []
    for a, (dim, group) in enumerate(zip(i.dims, i.groups)):
        if i.role == "state" and a == i.time_axis:
            out.append(0)
        elif isinstance(dim, int):
            out.append(dim)
        elif group is not None and group in sizes:
            out.append(sizes[group])
        elif i.role == "state":
            raise ConfigError(
                f"state input {i.name} has the dynamic dimension {dim!r} on axis {a}: its reset state needs a "
                "size there; export it with a static size, or declare cache.batch_axis / cache.time_axis in a spec "
                "file if that axis is its batch or its positions"
            )
        else:
            raise ConfigError(
                f"input {i.name}: no size for its dynamic dimension {dim!r}; declare it in [axes]"
            )
    return tuple(out)


def reset_state(i: InputSig, sizes: dict[str, int]) -> np.ndarray:
    """The reset state of a state input: zeros (a cache: of length 0 along its time axis)."""
    return np.zeros(input_shape(i, sizes), dtype=i.dtype)


def in_domain(lo: Any, hi: Any, shape: tuple[int, ...], dtype: str, rng: np.random.Generator) -> np.ndarray:
    """Uniform values in [lo, hi] (per feature: [F] bounds on the last axis) of `shape` and `dtype`,
    drawn in that dtype (no float64 copy of a large input)."""
    lo, hi = np.asarray(lo, np.float64), np.asarray(hi, np.float64)  # [F] or [1]
    work = np.float64 if dtype == "float64" else np.float32
    u = rng.random(shape, dtype=work)
    return (lo.astype(work) + (hi - lo).astype(work) * u).astype(dtype, copy=False)


def positions(i: InputSig, shape: tuple[int, ...], offset: int = 0) -> np.ndarray:
    """A position input: offset, offset+1, ... along its time axis, broadcast to `shape`."""
    ta = i.time_axis if i.time_axis is not None else (len(shape) - 1 if shape else None)
    if ta is None:
        return np.full(shape, offset, dtype=i.dtype)
    line = np.arange(offset, offset + shape[ta], dtype=i.dtype)  # [T]
    view = [1] * len(shape)
    view[ta] = shape[ta]
    return np.broadcast_to(line.reshape(view), shape).copy()


def mask_values(i: InputSig, valid: np.ndarray) -> np.ndarray:
    """A mask input's array from valid [.. bool ..] (True = a real position)."""
    pad = 1 - i.valid if i.valid in (0, 1) else 0
    return np.where(valid, i.valid, pad).astype(i.dtype)


def fixed_feeds(sig: Signature, sizes: dict[str, int], seed: int = 0) -> dict[str, np.ndarray]:
    """In-domain feeds at `sizes`, drawn uniformly (seeded); masks all valid; positions 0..T-1."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for i in sig.inputs:
        shape = input_shape(i, sizes)
        if i.role == "signal":
            assert i.lo is not None and i.hi is not None
            feeds[i.name] = in_domain(i.lo, i.hi, shape, i.dtype, rng)
        elif i.role == "state":
            feeds[i.name] = reset_state(i, sizes)
        elif i.role == "ids":
            assert i.vocab is not None
            feeds[i.name] = rng.integers(i.vocab[0], i.vocab[1] + 1, size=shape).astype(i.dtype)
        elif i.role == "mask":
            feeds[i.name] = mask_values(i, np.ones(shape, bool))
        else:
            feeds[i.name] = positions(i, shape)
    return feeds


# ----------------------------------------------------------------------------- KV-cache pairs


class Stepper:
    """Decode with a recurrent pair: the first k positions by the full graph (prefill "full") or
    by the step graph from the reset state (prefill "empty": zeros, a cache of length 0), then one
    step per position, each step's present outputs fed back as the next step's past inputs."""

    def __init__(self, sig: Signature, full: Any, step: Any) -> None:
        if sig.cache is None:
            raise ConfigError("this model has no step graph; pass --step STEP.onnx")
        self.sig, self.cache, self.full, self.step_graph = sig, sig.cache, full, step
        self.full_inputs = {i.name: i for i in sig.inputs}

    def batch_of(self, feeds: dict[str, np.ndarray]) -> int:
        for i in self.sig.inputs:
            if i.batch_axis is not None:
                return int(feeds[i.name].shape[i.batch_axis])
        return 1

    def empty_cache(self, batch: int) -> dict[str, np.ndarray]:
        """The reset state of every past input: zeros (a cache: of length 0 along its time axis),
        the batch axis at `batch`."""
        out = {}
        for t in self.cache.pasts:
            ta = self.cache.time_axis.get(t.name) if self.cache.kind(t.name) == "kv" else None
            ba = self.cache.batch_axis.get(t.name, 0 if self.cache.kind(t.name) == "kv" else None)
            shape = []
            for a, d in enumerate(t.dims):
                if a == ta:
                    shape.append(0)
                elif a == ba and not isinstance(d, int):
                    shape.append(batch)
                elif isinstance(d, int):
                    shape.append(d)
                else:
                    what = "an empty cache" if ta is not None else "its zero state"
                    raise ConfigError(
                        f"{'cache' if ta is not None else 'state'} input {t.name} has the dynamic dimension {d!r} on "
                        f"axis {a}; {what} needs it static (or declared: cache.batch_axis, cache.time_axis), or "
                        'prefill = "full" in the spec'
                    )
            out[t.name] = np.zeros(shape, dtype=t.dtype)
        return out

    def handed_on(self, outs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The next step's past inputs from a run's present outputs."""
        return {past: outs[present] for past, present in self.cache.pairs}

    def prefill(self, feeds: dict[str, np.ndarray], k: int) -> dict[str, np.ndarray]:
        """The state after positions 0..k-1: the full graph's present outputs on feeds[:k]
        (prefill "full"), or the step graph stepped from the reset state (prefill "empty")."""
        cache = self.empty_cache(self.batch_of(feeds))
        if k == 0:
            return cache
        if self.cache.prefill == "full":
            return self.handed_on(self.full.run(self.slice_full(feeds, 0, k)))
        for t in range(k):
            cache = self.handed_on(self.step_graph.run(self.step_feeds(feeds, t, cache)))
        return cache

    def slice_full(self, feeds: dict[str, np.ndarray], start: int, stop: int) -> dict[str, np.ndarray]:
        out = {}
        for i in self.sig.inputs:
            x = feeds[i.name]
            out[i.name] = (
                take(x, i.time_axis, start, stop)
                if i.time_axis is not None and i.role != "state" and i.time_group == self.time_group
                else x
            )
        return out

    @property
    def time_group(self) -> str | None:
        return self.sig.causal_group or (self.sig.time_groups[0] if self.sig.time_groups else None)

    def step_feeds(
        self, feeds: dict[str, np.ndarray], t: int, cache: dict[str, np.ndarray]
    ) -> dict[str, np.ndarray]:
        """The step graph's feeds at position t from the full-sequence feeds and the cache."""
        out = dict(cache)
        batch = self.batch_of(feeds)
        for i in self.cache.inputs:
            src = self.full_inputs.get(i.name)
            if src is not None:
                x = feeds[i.name]
                if src.time_axis is None or src.dims[src.time_axis] == 1:
                    out[i.name] = x  # no time axis, or a single-step model: its input is the position's
                elif i.span == "total":
                    out[i.name] = take(x, src.time_axis, 0, t + 1)
                else:
                    out[i.name] = take(x, src.time_axis, t, t + 1)
            else:  # a position input only the step graph has
                shape = tuple(
                    d
                    if isinstance(d, int)
                    else (batch if a == i.batch_axis else (t + 1 if i.span == "total" else 1))
                    for a, d in enumerate(i.dims)
                )
                out[i.name] = positions(i, shape, offset=0 if i.span == "total" else t)
        return out

    def decode(
        self, feeds: dict[str, np.ndarray], k: int, length: int
    ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Positions k..length-1 stepped after a prefill of k: ({shared output: the step outputs
        concatenated along its time axis}, the final cache)."""
        cache = self.prefill(feeds, k)
        pieces: dict[str, list[np.ndarray]] = {n: [] for n in self.cache.shared}
        for t in range(k, length):
            outs = self.step_graph.run(self.step_feeds(feeds, t, cache))
            for n in self.cache.shared:
                pieces[n].append(outs[n])
            cache = self.handed_on(outs)
        axes = {o.name: o.time_axis for o in self.sig.outputs}
        joined = {}
        for n, parts in pieces.items():
            axis = axes.get(n)
            joined[n] = np.concatenate(parts, axis=axis if axis is not None else 0) if parts else np.zeros(0)
        return joined, cache


# ----------------------------------------------------------------------------- certify


class ForeignSession:
    """A Steppable over a bare model for the latency campaign (not real-time safe: ORT allocates
    outputs; a growing cache costs more with the position).

    mode "step": step(x) runs the step graph on the primary input's one-position slice x (the
    first signal or ids input), the other inputs fixed (drawn once from the domain; a mask all
    valid; positions counted), its state or cache fed back; position 0 is prefilled by the full
    graph when the pair says so. max_len positions per sequence (a model that is one step with its
    state and no length of its own: STATE_STEPS); reset() returns to the reset state (zeros, an
    empty cache). static_cache: every pair is a fixed-size state (each step
    costs the same), so every position is timed.
    mode "full": step(x) runs the full graph on x at one fixed shape; the position stays 0."""

    def __init__(
        self,
        sig: Signature,
        full: Graph,
        step: Graph | None,
        *,
        mode: str,
        sizes: dict[str, int],
        max_len: int,
        seed: int = 0,
    ) -> None:
        self.sig, self.full, self.step_graph, self.mode = sig, full, step, mode
        self.primary = next(
            (i for i in sig.inputs if i.role in ("signal", "ids") and i.time_axis is not None),
            next((i for i in sig.inputs if i.role in ("signal", "ids")), None),
        )
        if self.primary is None:
            raise ConfigError("the model has no signal or ids input to drive; declare one in the spec")
        self.sizes = dict(sizes)
        budget = active()
        check_memory(sig, budget.memory if budget is not None else None, self.sizes)  # before allocating
        self.max_len = max_len if mode == "step" else 1
        if mode == "step" and max_len <= 1 and sig.cache is not None and sig.cache.states:
            p = self.primary
            if p.time_axis is None or p.dims[p.time_axis] == 1:  # one step: no length of its own
                self.max_len = STATE_STEPS
        self.static_cache = mode == "full" or (
            sig.cache is not None and all(sig.cache.kind(p) == "state" for p, _ in sig.cache.pairs)
        )
        self.position = 0
        if mode == "step":
            if step is None:
                raise ConfigError("certify --mode step needs the step graph: pass --step STEP.onnx")
            self.stepper = Stepper(sig, full, step)
            t = self.stepper.time_group
            self.sizes[t] = max_len  # the fixed inputs cover every position of a sequence
            self.fixed = fixed_feeds(sig, self.sizes, seed)
            self.cache: dict[str, np.ndarray] = {}
        else:
            self.fixed = fixed_feeds(sig, self.sizes, seed)

    def input_shape(self) -> tuple[int, ...]:
        """The shape of x that step() takes."""
        assert self.primary is not None
        shape = list(input_shape(self.primary, self.sizes))
        if self.mode == "step" and self.primary.time_axis is not None:
            shape[self.primary.time_axis] = 1
        return tuple(shape)

    def make_inputs(self, n: int, seed: int) -> np.ndarray:
        """n distinct inputs for step(), drawn uniformly from the declared domain: [n, *input_shape]."""
        p = self.primary
        assert p is not None
        rng = np.random.default_rng(seed)
        shape = (n, *self.input_shape())
        if p.role == "ids":
            assert p.vocab is not None
            return rng.integers(p.vocab[0], p.vocab[1] + 1, size=shape).astype(p.dtype)
        assert p.lo is not None and p.hi is not None
        lo, hi = np.asarray(p.lo, np.float64), np.asarray(p.hi, np.float64)  # [F] or [1]
        return (lo + (hi - lo) * rng.random(shape)).astype(p.dtype)

    def reset(self) -> None:
        self.position = 0
        self.cache = {}

    def step(self, x: np.ndarray) -> np.ndarray:
        assert self.primary is not None
        name = self.primary.name
        if self.mode == "full":
            feeds = dict(self.fixed)
            feeds[name] = x
            return next(iter(self.full.run(feeds).values()))
        pos = self.position
        if pos >= self.max_len:
            from tickformer.errors import ContextFull

            raise ContextFull(f"position {pos} is at max_len {self.max_len}; call reset()")
        ta = self.primary.time_axis
        feeds = self.fixed  # the sequence buffer: position pos takes x, in place
        if ta is not None and feeds[name].shape[ta] != 1:
            take(feeds[name], ta, pos, pos + 1)[...] = x
        else:  # no time axis, or a single-step model: the input is the position's
            feeds[name] = x
        if pos == 0 and self.stepper.cache.prefill == "full":
            outs = self.full.run(self.stepper.slice_full(feeds, 0, 1))
        else:
            cache = self.cache if pos else self.stepper.empty_cache(self.stepper.batch_of(feeds))
            outs = self.step_graph.run(self.stepper.step_feeds(feeds, pos, cache))  # type: ignore[union-attr]
        self.cache = self.stepper.handed_on(outs)
        self.position = pos + 1
        shared = self.stepper.cache.shared
        return outs[shared[0]] if shared else next(iter(outs.values()))
