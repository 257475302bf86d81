"""What the graph prover reads off the ONNX protos: a node's attributes, a tensor's element type
as a numpy dtype, a graph input's declared shape. onnx is imported when called (an optional
dependency: the cpu/gpu extras). Not real-time code.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def attrs(node: Any) -> dict[str, Any]:
    """A NodeProto's attributes as Python values."""
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def onnx_dtype(code: int) -> np.dtype:
    """The numpy dtype of an ONNX element type code."""
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(code))


def elem_dtype(value_info: Any) -> np.dtype:
    """The numpy dtype of a ValueInfoProto's tensor type."""
    return onnx_dtype(value_info.type.tensor_type.elem_type)


def declared_shape(value_info: Any) -> tuple[int | str, ...]:
    """A ValueInfoProto's shape: an int per static dimension, the dim_param (or "?") otherwise."""
    dims = value_info.type.tensor_type.shape.dim
    return tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in dims)
