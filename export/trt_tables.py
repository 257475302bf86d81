"""TensorRT's documented ONNX support, transcribed for named releases: the operator tables, the
element types and what TensorRT does with each, and the targets (`TARGETS`: one `TargetSpec` per
release line, built on first use: the opset-20 restriction reads `onnx.defs`) that
export/trt_support.py lints graphs against. Facts only; the checks are trt_support's.

Sources (facts only; nothing copied):
- onnx/onnx-tensorrt `docs/operators.md`, the release of TensorRT 10.15: opset range 9..24,
  supported data types, per-operator "Supported" column and restrictions (e.g. `Attention`
  rejects `past_key`/`past_value`/`nonpad_kv_seqlen` inputs and `present_*` outputs; Reduce*
  `axes` must be an initializer; ScatterND `reduction` must be `none`; Dropout `is_training`
  must be an initializer evaluating to false; LayerNormalization only the first output;
  TopK `sorted` = 1 and K < 3840; UINT8 only at network I/O; INT8/INT4/FP8/FP4 only as
  quantized types through Q/DQ; DOUBLE cast down to FLOAT with clamping to +-FLT_MAX).
- NVIDIA TensorRT docs, "ONNX Opset Guide" for 11.x: ONNX 1.20, opset 9..25.
- NVIDIA TensorRT docs, "Migrating from TensorRT 10.x to 11.x": strongly typed networks are
  required, BuilderFlag.FP16/BF16/INT8/FP8 and OBEY/PREFER_PRECISION_CONSTRAINTS removed.
- TensorRT 10.3 (JetPack 6): the 10.x operator table restricted to operators that exist at
  opset <= 20 (the opset ceiling of the 10.0-10.7 parser documentation). Operators first
  defined after opset 20 (Attention 23, RMSNormalization 23, RotaryEmbedding 23,
  TensorScatter 24, ...) are therefore unsupported there; this rule is computed from
  `onnx.defs` rather than typed by hand.
- TensorRT DataType docs: BF16 needs compute capability >= 8.0 (Ampere; Jetson Orin is 8.7).

Not real-time code.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

# Operators with "Y" in the onnx-tensorrt operators.md of TensorRT 10.15 (default domain).
SUPPORTED_10X = frozenset(
    """
    Abs Acos Acosh Add And ArgMax ArgMin Asin Asinh Atan Atanh Attention AveragePool
    BatchNormalization BlackmanWindow Cast CastLike Ceil Celu Clip Concat Constant
    ConstantOfShape Conv ConvTranspose Cos Cosh CumSum DeformConv DepthToSpace DequantizeLinear
    Div Dropout Einsum Elu Equal Erf Exp Expand EyeLike Flatten Floor Gather GatherElements
    GatherND Gelu Gemm GlobalAveragePool GlobalLpPool GlobalMaxPool Greater GreaterOrEqual
    GridSample GroupNormalization GRU HammingWindow HannWindow HardSigmoid HardSwish Hardmax
    Identity If ImageScaler InstanceNormalization IsInf IsNaN LayerNormalization LeakyRelu Less
    LessOrEqual Log LogSoftmax Loop LRN LSTM LpNormalization LpPool MatMul Max MaxPool Mean
    MeanVarianceNormalization Min Mish Mod Mul Neg NonMaxSuppression NonZero Not OneHot Or Pad
    ParametricSoftplus Pow PRelu QuantizeLinear RandomNormal RandomNormalLike RandomUniform
    RandomUniformLike Range Reciprocal ReduceL1 ReduceL2 ReduceLogSum ReduceLogSumExp ReduceMax
    ReduceMean ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu Reshape Resize
    ReverseSequence RMSNormalization RNN RoiAlign RotaryEmbedding Round STFT ScaledTanh Scan
    Scatter ScatterElements ScatterND Selu Shape Shrink Sigmoid Sign Sin Sinh Size Slice Softmax
    Softplus Softsign SpaceToDepth Split Sqrt Squeeze Sub Sum Tan Tanh TensorScatter
    ThresholdedRelu Tile TopK Transpose Trilu Unsqueeze Upsample Where Xor
    """.split()
)

# Operators documented as unsupported ("N"); listed so the message can say "documented
# unsupported" rather than "not in the table".
UNSUPPORTED_10X = frozenset(
    """
    AffineGrid Bernoulli BitShift BitwiseAnd BitwiseNot BitwiseOr BitwiseXor Col2Im
    CenterCropPad Compress ConcatFromSequence ConvInteger DFT Det DynamicQuantizeLinear
    ImageDecoder MatMulInteger MaxRoiPool MaxUnpool MelWeightMatrix Multinomial
    NegativeLogLikelihoodLoss Optional OptionalGetElement OptionalHasElement QLinearConv
    QLinearMatMul RegexFullMatch SequenceAt SequenceConstruct SequenceEmpty SequenceErase
    SequenceInsert SequenceLength SequenceMap SoftmaxCrossEntropyLoss SplitToSequence
    StringConcat StringNormalizer StringSplit TfIdfVectorizer Unique
    """.split()
)

# Ops whose output shape depends on data: they break a static step and CUDA-graph capture.
DATA_DEPENDENT_SHAPE = frozenset({"NonZero", "NonMaxSuppression", "Unique", "Compress"})
CONTROL_FLOW = frozenset({"If", "Loop", "Scan"})
RANDOM = frozenset({"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike"})
REDUCE = frozenset(
    {
        "ReduceL1",
        "ReduceL2",
        "ReduceLogSum",
        "ReduceLogSumExp",
        "ReduceMax",
        "ReduceMean",
        "ReduceMin",
        "ReduceProd",
        "ReduceSum",
        "ReduceSumSquare",
    }
)

# Ops that may read an infinite constant safely: selection and comparison, no arithmetic.
SELECTION_OPS = frozenset(
    {"Where", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Max", "Min", "IsInf"}
)

FP16_MAX = 65504.0
FP16_TINY = 2.0**-24  # smallest positive fp16 subnormal; below it values flush to zero

# ONNX TensorProto element types, by name, and what TensorRT does with each.
TYPE_NAME = {
    1: "FLOAT",
    2: "UINT8",
    3: "INT8",
    4: "UINT16",
    5: "INT16",
    6: "INT32",
    7: "INT64",
    8: "STRING",
    9: "BOOL",
    10: "FLOAT16",
    11: "DOUBLE",
    12: "UINT32",
    13: "UINT64",
    14: "COMPLEX64",
    15: "COMPLEX128",
    16: "BFLOAT16",
    17: "FLOAT8E4M3FN",
    18: "FLOAT8E4M3FNUZ",
    19: "FLOAT8E5M2",
    20: "FLOAT8E5M2FNUZ",
    21: "UINT4",
    22: "INT4",
    23: "FLOAT4E2M1",
}
NATIVE_TYPES = frozenset({"FLOAT", "FLOAT16", "INT32", "INT64", "BOOL"})
QUANTIZED_TYPES = frozenset({"INT8", "INT4", "FLOAT8E4M3FN", "FLOAT4E2M1"})


@dataclass(frozen=True)
class TargetSpec:
    """One TensorRT release line as the ONNX parser documents it."""

    name: str
    trt_version: str
    opset_min: int
    opset_max: int
    operators: frozenset[str]
    strongly_typed_only: bool
    source: str

    def __post_init__(self) -> None:
        if not 1 <= self.opset_min <= self.opset_max:
            raise ValueError(f"target {self.name}: opset range {self.opset_min}..{self.opset_max} is empty")


@functools.lru_cache(maxsize=1)
def _first_opsets() -> dict[str, int]:
    from onnx import defs

    first: dict[str, int] = {}
    for schema in defs.get_all_schemas_with_history():
        if schema.domain in ("", "ai.onnx"):
            first[schema.name] = min(first.get(schema.name, schema.since_version), schema.since_version)
    return first


def first_opset(op_type: str) -> int | None:
    """Opset in which `op_type` first appeared in the default domain (None if unknown)."""
    return _first_opsets().get(op_type)


def _ops_up_to(opset_max: int) -> frozenset[str]:
    return frozenset(op for op in SUPPORTED_10X if (first_opset(op) or 0) <= opset_max)


OPERATORS_MD = "onnx/onnx-tensorrt docs/operators.md (TensorRT 10.15 release)"

TARGETS: dict[str, TargetSpec] = {}


def _register(spec: TargetSpec) -> None:
    TARGETS[spec.name] = spec


def build_targets() -> None:
    """Fill TARGETS (once: target() and target_names() call it when it is empty)."""
    _register(
        TargetSpec(
            name="trt-10.3",
            trt_version="10.3",
            opset_min=9,
            opset_max=20,
            operators=_ops_up_to(20),
            strongly_typed_only=False,
            source=f"{OPERATORS_MD}, restricted to operators defined at opset <= 20 (10.0-10.7 parser ceiling)",
        )
    )
    _register(
        TargetSpec(
            name="trt-10",
            trt_version="10.15",
            opset_min=9,
            opset_max=24,
            operators=SUPPORTED_10X,
            strongly_typed_only=False,
            source=OPERATORS_MD,
        )
    )
    _register(
        TargetSpec(
            name="trt-11",
            trt_version="11.x",
            opset_min=9,
            opset_max=25,
            operators=SUPPORTED_10X,
            strongly_typed_only=True,
            source=f"{OPERATORS_MD}; opset 9..25 from the TensorRT 11.x ONNX Opset Guide; "
            "strong typing from the 10.x->11.x migration guide",
        )
    )
