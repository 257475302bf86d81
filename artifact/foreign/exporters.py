"""What a fixed batch or length in a bare model means, and the export argument that would make it
dynamic: the exact `torch.onnx.export` keyword for the exporter that wrote the graph
(graph.exporter_of: dynamo=True writes `dynamic_shapes` per forward argument, the TorchScript
exporter `dynamic_axes` per input and output name), or the ONNX declaration for another tool.

    fixed_axes(inputs, outputs)   {tensor: {axis: "batch" | "time"}} of the batch and time axes a
                                  graph declares with a static size
    dynamic_hint(exporter, ...)   "torch.onnx.export(..., dynamo=True, dynamic_shapes={...})", ...

Pure functions. Not real-time code.
"""

from __future__ import annotations

from typing import Any


def fixed_axes(tensors: list[Any], *, time: bool = True) -> dict[str, dict[int, str]]:
    """{name: {axis: "batch" | "time"}} of every batch (and time, unless time=False) axis with a
    static size, over InputSig/OutputSig-like objects (dims, batch_axis, time_axis)."""
    out: dict[str, dict[int, str]] = {}
    for t in tensors:
        axes = {}
        if t.batch_axis is not None and isinstance(t.dims[t.batch_axis], int):
            axes[t.batch_axis] = "batch"
        if time and t.time_axis is not None and isinstance(t.dims[t.time_axis], int):
            axes[t.time_axis] = "time"
        if axes:
            out[t.name] = dict(sorted(axes.items()))
    return out


def dynamic_hint(exporter: str, inputs: dict[str, dict[int, str]], outputs: dict[str, dict[int, str]]) -> str:
    """The export argument that declares those axes dynamic (module docstring)."""
    if exporter == "torch-dynamo":
        return (
            f"re-export with torch.onnx.export(..., dynamo=True, dynamic_shapes={inputs!r}) (keys: the names of "
            "forward's arguments)"
        )
    if exporter == "torch-script":
        return f"re-export with torch.onnx.export(..., dynamo=False, dynamic_axes={ {**inputs, **outputs}!r})"
    names = ", ".join(f"{name} axis {a}" for name, axes in inputs.items() for a in axes)
    return (
        f"export {names} with a dim_param name (onnx.helper.make_tensor_value_info(NAME, TYPE, "
        "['batch', 'time', ...]))"
    )


def describe(fixed: dict[str, dict[int, str]], dims: dict[str, tuple[Any, ...]]) -> str:
    """'x: batch axis 0 fixed at 1, time axis 1 fixed at 5' for the fixed axes of the inputs."""
    parts = []
    for name, axes in fixed.items():
        what = ", ".join(f"{role} axis {a} fixed at {dims[name][a]}" for a, role in axes.items())
        parts.append(f"{name}: {what}")
    return "; ".join(parts)
