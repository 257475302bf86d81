"""What an operator rule of the graph prover receives: `Call` (the node's op_type, attributes,
label and output count, the bitset width, the zero-weight sites a product records) and the
node's inputs, each concrete (np.ndarray, from the position subgraph or a constant) or abstract
(`values.Sym`). A rule returns one value per node output. Not real-time code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..values import Sym, Unsupported, Value, lift


@dataclass(frozen=True)
class Call:
    """One node applied in the data part of a graph at one state."""

    op: str  # the node's op_type
    attrs: dict[str, Any]
    label: str  # "name (OpType)", for messages
    outputs: int  # how many outputs the node declares
    words: int  # the bitsets' width W (uint64 words)
    sites: dict[str, np.ndarray]  # node label -> atoms passed softly there (MatMul records them)

    def sym(self, a: Value) -> Sym:
        """a as an abstract value (a concrete one lifted: no atoms, known constants)."""
        return a if isinstance(a, Sym) else lift(a, self.words)

    def concrete(self, a: Value, what: str) -> np.ndarray:
        """a as a concrete array; Unsupported when it is computed from data (a data-dependent
        shape, axes or sizes)."""
        if isinstance(a, Sym):
            raise Unsupported(f"{self.label}: its {what} is computed from data (a data-dependent shape)")
        return np.asarray(a)


Rule = Callable[[Call, list[Value]], list[Value]]
