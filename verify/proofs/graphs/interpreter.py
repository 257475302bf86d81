"""One ONNX graph interpreted at one state of a position domain (the package docstring: How).

Every node is of one of three kinds, fixed once per graph: "const" (initializers and nodes of
constants only: evaluated once), "state" (the position subgraph: nodes of constants, the integer
domain inputs and shapes, evaluated concretely at each state with onnx.reference's operator
implementations) and "sym" (everything else: abstract values, each node through its rule in
`ops.HANDLERS`). The atoms of a state are each position source's rows, every other data input,
and the taps (graph outputs the graph also consumes: the step's own new K/V rows).

Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from .domains import State
from .ops import HANDLERS
from .ops.base import Call
from .proto import attrs, elem_dtype
from .values import Sym, Unsupported, Value, nodeps


@dataclass(frozen=True)
class Atoms:
    """The atoms of one state: each position source's rows, every other data input, and the taps
    (graph outputs that the graph also consumes: the step's own new K/V rows)."""

    offsets: dict[str, tuple[int, int]]  # name -> (first atom, count)
    n: int

    @property
    def words(self) -> int:
        return max(1, -(-self.n // 64))

    def bits(self, name: str, index: int = 0) -> tuple[int, int]:
        a = self.offsets[name][0] + index
        return a // 64, a % 64

    def mask(self, words: np.ndarray, name: str) -> np.ndarray:
        """bool [count] of the atoms of `name` set in a [W] bitset."""
        first, count = self.offsets[name]
        flags = np.unpackbits(words.astype("<u8").view(np.uint8), bitorder="little")
        return flags[first : first + count].astype(bool)


class Interpreter:
    """Abstract interpretation of one ONNX graph (see the module docstring)."""

    def __init__(self, model: Any, domain_inputs: Sequence[str]) -> None:
        from onnx import numpy_helper
        from onnx.reference import ReferenceEvaluator

        self.model = model
        self.graph = model.graph
        self.nodes = list(self.graph.node)
        self.attrs = [attrs(n) for n in self.nodes]
        for node in self.nodes:
            if any(a.HasField("g") or len(a.graphs) for a in node.attribute):
                raise Unsupported(f"node {node.name!r} ({node.op_type}) holds a subgraph (control flow)")
        self.inits = {t.name: numpy_helper.to_array(t) for t in self.graph.initializer}
        self.inputs = [i.name for i in self.graph.input if i.name not in self.inits]
        self.outputs = [o.name for o in self.graph.output]
        self.domain_inputs = set(domain_inputs)
        self.input_dtypes = {i.name: elem_dtype(i) for i in self.graph.input}
        # kinds: "const" (initializers, constant nodes), "state" (position subgraph), "sym" (data)
        kind: dict[str, str] = {name: "const" for name in self.inits}
        kind[""] = "const"
        for name in self.inputs:
            kind[name] = "state" if name in self.domain_inputs else "sym"
        self.node_kind = []
        for node in self.nodes:
            ins = [kind[i] for i in node.input]
            if node.op_type in ("Shape", "Size"):
                k = "state"
            elif all(x == "const" for x in ins):
                k = "const"
            elif all(x in ("const", "state") for x in ins):
                k = "state"
            else:
                k = "sym"
            self.node_kind.append(k)
            for out in node.output:
                kind[out] = k
        self.kind = kind
        consumed = {i for n in self.nodes for i in n.input}
        self.taps = [o for o in self.outputs if o in consumed]
        self._ref = ReferenceEvaluator(model)
        self.const_values: dict[str, np.ndarray] = dict(self.inits)
        for i, node in enumerate(self.nodes):
            if self.node_kind[i] == "const":
                outs = self._ref.rt_nodes_[i].run(*[self.const_values[x] if x else None for x in node.input])
                for name, val in zip(node.output, outs):
                    self.const_values[name] = np.asarray(val)

    # -- per state --
    def atoms(self, sources: dict[str, int | None], shapes: dict[str, tuple[int, ...]]) -> Atoms:
        offsets: dict[str, tuple[int, int]] = {}
        n = 0
        for name in self.inputs:
            if name in self.domain_inputs:
                continue
            axis = sources.get(name)
            count = 1 if axis is None else shapes[name][axis]
            offsets[name] = (n, count)
            n += count
        for name in self.taps:
            offsets["own:" + name] = (n, 1)
            n += 1
        return Atoms(offsets, n)

    def run(
        self,
        state: State,
        sources: dict[str, int | None],
        static_shapes: dict[str, tuple[int, ...]],
    ) -> tuple[dict[str, Value], Atoms, dict[str, np.ndarray], dict[str, tuple[int, ...]]]:
        """Interpret the graph at one state: (outputs, atoms, zero-weight sites, every node's shapes)."""
        shapes = {**static_shapes, **state.shapes}
        atoms = self.atoms(sources, shapes)
        w = atoms.words
        env: dict[str, Value] = dict(self.const_values)
        env[""] = None
        for name in self.inputs:
            if name in self.domain_inputs:
                env[name] = state.feeds[name]
                continue
            shape = shapes[name]
            axis = sources.get(name)
            first, count = atoms.offsets[name]
            dims = [1] * len(shape)
            if axis is not None:
                dims[axis] = shape[axis]
            hard = np.zeros((count, w), dtype=np.uint64)
            index = first + np.arange(count)
            hard[np.arange(count), index // 64] = np.left_shift(np.uint64(1), (index % 64).astype(np.uint64))
            if axis is None:
                hard = np.bitwise_or.reduce(hard, axis=0)
            hard = hard.reshape(tuple(dims) + (w,))
            env[name] = Sym(
                shape,
                hard,
                nodeps(shape, w),
                np.full((1,) * len(shape), np.nan),
                self.input_dtypes[name],
            )
        sites: dict[str, np.ndarray] = {}
        node_shapes: dict[str, tuple[int, ...]] = {}
        for i, node in enumerate(self.nodes):
            k = self.node_kind[i]
            if k == "const":
                continue
            args = [env[x] for x in node.input]
            label = f"{node.name or node.output[0]} ({node.op_type})"
            if k == "state":
                outs = self._state_node(i, node, args)
            else:
                try:
                    outs = self._sym_node(node, self.attrs[i], args, w, sites, label)
                except Unsupported:
                    raise
                except Exception as exc:  # a rule that cannot apply to these shapes
                    raise Unsupported(f"{label}: {type(exc).__name__}: {exc}") from None
            for name, val in zip(node.output, outs):
                if isinstance(val, Sym) and name in self.taps:
                    word, bit = atoms.bits("own:" + name)
                    tap = nodeps(val.shape, w)
                    tap[..., word] = np.uint64(1) << np.uint64(bit)
                    val = Sym(val.shape, val.hard | tap, val.soft, val.const, val.dtype)
                env[name] = val
                node_shapes[name] = tuple(val.shape) if isinstance(val, Sym) else tuple(np.shape(val))
        return {o: env[o] for o in self.outputs}, atoms, sites, node_shapes

    def _state_node(self, i: int, node: Any, args: list[Value]) -> list[Value]:
        if node.op_type in ("Shape", "Size"):
            shape = args[0].shape if isinstance(args[0], Sym) else np.shape(args[0])
            if node.op_type == "Size":
                return [np.array(int(np.prod(shape)), dtype=np.int64)]
            a = self.attrs[i]
            start, end = a.get("start", 0), a.get("end", None)
            return [np.array(list(shape)[start:end], dtype=np.int64)]
        outs = self._ref.rt_nodes_[i].run(*args)
        return [np.asarray(o) for o in outs]

    def _sym_node(
        self,
        node: Any,
        node_attrs: dict[str, Any],
        args: list[Value],
        w: int,
        sites: dict[str, np.ndarray],
        label: str,
    ) -> list[Value]:
        rule = HANDLERS.get(node.op_type)
        if rule is None:
            raise Unsupported(f"{label}: operator {node.op_type} is not supported by the graph prover")
        return rule(Call(node.op_type, node_attrs, label, len(node.output), w, sites), args)
