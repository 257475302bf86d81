"""The things the benchmarks time, each built once and exposed as `reset()` / `step()` callables
(stateful: one token per call) or a `call()` (stateless: one full recompute of a prefix).

Subjects (decoder-only, continuous inputs, batch 1, one thread):
    numpy        tickformer.runtime session, backend "numpy" (the reference step, static cache)
    numpy-growing  the numpy backend's growing-cache variant (cost grows with the position)
    ort          tickformer.runtime session, backend "ort" with its default options (step.onnx,
                 static cache: constant time; the binding is recorded with the results)
    ort-no-ftz   the same session in a thread without flush-to-zero (every other subject runs
                 with it, benchmarks/conftest.py)
    ort-run      the same with binding="run" (InferenceSession.run, outputs copied)
    ort-grow     growing_step.py: past/present ONNX step under ORT (the Optimum-style export)
    torch        torch eager, KV cache preallocated to max_len (torch_reference.py)
    ort-recompute / torch-recompute: the whole prefix through model.onnx / torch per token
    ort-floor    ORT identity graph, one [1, 1, d_in] input, bare InferenceSession.run
    ort-floor-io a graph with step.onnx's exact I/O signature doing (almost) nothing, through
                 the same tickformer Session.step path as `ort`: the runtime's own floor

Artifacts are exported with tickformer's exporter (`tickformer.export.writer.export_artifact`)
from a checkpoint written by `tickformer.model.checkpoint.save_checkpoint`. Not real-time code.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

ORT_THREADS = 1


@dataclass
class Stateful:
    name: str
    reset: Callable[[], object]
    step: Callable[[], object]
    close: Callable[[], object] = lambda: None


def ort_options():
    """tickformer's latency options (runtime/ort_session.py) with one intra-op and one inter-op
    thread, sequential execution."""
    import onnxruntime as ort

    from tickformer.runtime.ort_session import session_options

    options = session_options()
    options.intra_op_num_threads = ORT_THREADS
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return options


def runtime():
    import tickformer.runtime

    return tickformer.runtime


def export_artifact(config, params, out: Path, *, lengths: list[int] | None = None) -> Path:
    """checkpoint -> artifact with tickformer's own exporter (skips if it is not built yet).
    lengths: the export-time equivalence lengths (None = the exporter's default); the scaling
    runs pass a short list so a max_len 2048 export does not spend minutes verifying."""
    from tickformer.export import writer as art_mod
    from tickformer.model import checkpoint as ckpt_mod

    ckpt = ckpt_mod.save_checkpoint(out / "ckpt", config, params, {"task": "benchmark"})
    return Path(art_mod.export_artifact(ckpt, out / "art", max_len=config.max_len, lengths=lengths))


SESSION_KINDS = {
    "ort": ("ort", {}),  # what a user gets: the backend's defaults
    "ort-run": ("ort", {"binding": "run"}),
    "numpy": ("numpy", {}),
    "numpy-growing": ("numpy-growing", {}),
}


def open_session(art: Path, kind: str):
    """A tickformer.runtime session; `kind` names backend + options (SESSION_KINDS), contracts off."""
    backend, options = SESSION_KINDS[kind]
    return runtime().load(art, backend=backend, **options)


def session_subject(name: str, sess, x: np.ndarray) -> Stateful:
    step = sess.step
    subject = Stateful(name, sess.reset, lambda: step(x), getattr(sess, "close", lambda: None))
    subject.options = {"binding": getattr(sess.backend, "binding", None)}  # type: ignore[attr-defined]
    return subject


def torch_subject(torch, config, params, x: np.ndarray) -> Stateful:
    import torch_reference as tr

    model = tr.build(params, config)
    cache = model.new_cache(1)
    tx = torch.from_numpy(x)
    state = [0]

    def reset() -> None:
        state[0] = 0

    def step():
        with torch.inference_mode():
            y = model.step(tx, cache, state[0])
        state[0] += 1
        return y

    return Stateful("torch", reset, step)


def growing_subject(config, params, x: np.ndarray) -> Stateful:
    import growing_step as gs

    sess = gs.GrowingSession(gs.build_growing_step(params, config), config, ort_options())
    return Stateful("ort-grow", sess.reset, lambda: sess.step(x))


def full_graph(config, params):
    """tickformer's model.onnx graph (export/graphs.py build_model: the graph the artifact holds),
    built directly so long max_len need not go through the export-time equivalence checks."""
    from tickformer.export import graphs

    return graphs.build_model(params, config, 1, 17)


def ort_recompute(model, prefix: np.ndarray) -> Callable[[], object]:
    """model.onnx on the whole prefix [1, T, d_in] (what a KV cache replaces); one call = one token."""
    import onnxruntime as ort

    data = model.SerializeToString()
    sess = ort.InferenceSession(data, sess_options=ort_options(), providers=["CPUExecutionProvider"])
    in_name = sess.get_inputs()[0].name
    out_names = [sess.get_outputs()[0].name]
    feeds = {in_name: prefix}
    run = sess.run
    return lambda: run(out_names, feeds)


def torch_recompute(torch, config, params, prefix: np.ndarray) -> Callable[[], object]:
    import torch_reference as tr

    model = tr.build(params, config)
    tx = torch.from_numpy(prefix)

    def call():
        with torch.inference_mode():
            return model(tx)

    return call


def identity_floor(d_in: int) -> Callable[[], object]:
    """The least ORT can do per call on this machine: Identity on [1, 1, d_in] via run()."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "floor",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, d_in])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, d_in])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model, full_check=True)
    sess = ort.InferenceSession(
        model.SerializeToString(), sess_options=ort_options(), providers=["CPUExecutionProvider"]
    )
    feeds = {"x": np.zeros((1, 1, d_in), dtype=np.float32)}
    names = ["y"]
    run = sess.run
    return lambda: run(names, feeds)


def floor_step_graph(step_path: Path):
    """A graph with step.onnx's exact inputs and outputs that does almost nothing: each output is
    a Slice of an input of the same rank (y from x, k_new.i/v_new.i: row 0 of layer i's cache); `pos` is
    fed but unused. The cost left is the call path and ORT's per-run overhead."""
    import onnx
    from onnx import helper, numpy_helper

    step = onnx.load(str(step_path), load_external_data=False)
    inputs = {v.name: v for v in step.graph.input}
    dims = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in list(step.graph.input) + list(step.graph.output)
    }
    nodes, inits = [], []

    def ints(name: str, values: list[int]) -> str:
        inits.append(numpy_helper.from_array(np.asarray(values, dtype=np.int64), name=name))
        return name

    for out in step.graph.output:
        stem, _, layer = out.name.partition(".")  # k_new.0 <- k_cache.0 (format 2: one per layer)
        src = {"y": "x", "logits": "tokens", "k_new": f"k_cache.{layer}", "v_new": f"v_cache.{layer}"}[stem]
        shape = dims[out.name]
        if inputs[src].type.tensor_type.elem_type != out.type.tensor_type.elem_type or len(dims[src]) != len(
            shape
        ):
            raise ValueError(f"cannot build a floor graph for output {out.name!r} from input {src!r}")
        rank = len(shape)
        nodes.append(
            helper.make_node(
                "Slice",
                [
                    src,
                    ints(f"{out.name}_starts", [0] * rank),
                    ints(f"{out.name}_ends", shape),
                    ints(f"{out.name}_axes", list(range(rank))),
                ],
                [out.name],
            )
        )
    graph = helper.make_graph(
        nodes, "floor_step", list(step.graph.input), list(step.graph.output), initializer=inits
    )
    model = helper.make_model(graph, opset_imports=list(step.opset_import), ir_version=step.ir_version)
    onnx.checker.check_model(model, full_check=True)
    return model


def swapped_artifact(art: Path, step_model, out: Path) -> Path:
    """A copy of `art` whose step.onnx is `step_model` (same I/O signature), the manifest's file
    hash and self-hash updated (the runtime refuses anything else), so that
    tickformer.runtime.load runs it through exactly the same Session.step path."""
    import shutil

    import onnx

    shutil.copytree(art, out)
    onnx.save(step_model, str(out / "step.onnx"))
    manifest = json.loads((out / "manifest.json").read_text())
    data = (out / "step.onnx").read_bytes()
    manifest = copy.deepcopy(manifest)
    manifest["files"]["step.onnx"] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    from tickformer.sealed import MANIFEST_HASH
    from tickformer.sealed import digest as manifest_digest

    if MANIFEST_HASH in manifest:  # the manifest's self-hash
        manifest[MANIFEST_HASH] = manifest_digest(manifest)
    tmp = out / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2))
    os.replace(tmp, out / "manifest.json")
    return out


def floor_artifact(art: Path, out: Path) -> Path:
    """`art` with the do-nothing step graph of `floor_step_graph`."""
    return swapped_artifact(art, floor_step_graph(art / "step.onnx"), out)


def open_floor_session(floor: Path):
    """An ORT session on `floor_artifact`'s output, through the same load and Session.step path.
    The floor graph is on purpose not the artifact's model; loading is reading (hashes, signature),
    so it loads (the graph/weights check runs at export and on demand: export/consistency.py)."""
    return open_session(floor, "ort")
