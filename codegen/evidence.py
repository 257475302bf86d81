"""Static evidence about a compiled step: worst-case stack, recursion, symbols.

    python -m tickformer.codegen.evidence DIR     # DIR: a `tickformer codegen` output, after `make`

Stack: GCC's -fcallgraph-info=su (written by the Makefile's tf_model.o rule as tf_model.ci)
gives every function's frame size and qualifier ("static": fixed; "dynamic,bounded": a fixed
upper bound, e.g. stack realignment for vector spills) and the call edges after inlining. The
worst case of an entry point is its frame plus the worst callee chain; the graph must be
acyclic (no recursion), and a callee without a frame size (an external function) is listed.
Symbols: `nm` of tf_model.o must show no writable data (no D/d/B/b/C symbols: the library
keeps no state) and undefined references only from ALLOWED_UNDEFINED.
Bytes: `bytes_per_step`, what one step must read -- the numerator of the memory-bandwidth
floor that benchmarks/test_c_step.py measures.

Not real-time code.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .weights import BYTES as WEIGHT_BYTES

if TYPE_CHECKING:
    from .plan import Plan

ENTRY_POINTS = ("tf_step", "tf_stage", "tf_commit", "tf_reset")
ALLOWED_UNDEFINED = frozenset({"sqrtf"})  # only when sqrtf is not inlined (-O0, or with math errno)

_NODE = re.compile(r'node: \{ title: "([^"]+)" label: "[^\\]*\\n[^\\]*(?:\\n(\d+) bytes \(([^)]*)\))?')
_EDGE = re.compile(r'edge: \{ sourcename: "([^"]+)" targetname: "([^"]+)"')


@dataclass(frozen=True)
class StackReport:
    worst: dict[str, int]  # entry point -> worst-case bytes (frames of known size)
    chain: dict[str, list[str]]  # entry point -> the deepest chain
    qualifiers: dict[str, str]  # function -> "static" | "dynamic,bounded" | ...
    external: list[str]  # callees without a known frame (library functions)


def _short(title: str) -> str:
    return title.rsplit(":", 1)[-1]


def stack_report(ci: "str | Path") -> StackReport:
    """Worst-case stack of each entry point from a -fcallgraph-info=su file. Raises ValueError
    on recursion (a cycle) or an unbounded ("dynamic" without "bounded") frame."""
    text = Path(ci).read_text()
    size: dict[str, int] = {}
    qual: dict[str, str] = {}
    external = []
    for title, nbytes, q in _NODE.findall(text):
        if nbytes:
            size[title], qual[_short(title)] = int(nbytes), q
        else:
            external.append(title)
    edges: dict[str, set[str]] = {}
    for src, dst in _EDGE.findall(text):
        edges.setdefault(src, set()).add(dst)
    for name, q in qual.items():
        if "dynamic" in q and "bounded" not in q:
            raise ValueError(f"{name} has an unbounded stack frame ({q})")
    memo: dict[str, tuple[int, list[str]]] = {}

    def depth(node: str, path: tuple[str, ...]) -> tuple[int, list[str]]:
        if node in path:
            raise ValueError(f"recursion: {' -> '.join(_short(p) for p in path + (node,))}")
        if node in memo:
            return memo[node]
        best, best_chain = 0, []
        for callee in sorted(edges.get(node, ())):
            d, c = depth(callee, path + (node,))
            if d > best:
                best, best_chain = d, c
        memo[node] = (size.get(node, 0) + best, [_short(node)] + best_chain)
        return memo[node]

    worst, chain = {}, {}
    for node in size:
        depth(node, ())  # every function, so a cycle anywhere is found
    for entry in ENTRY_POINTS:
        if entry in size:
            worst[entry], chain[entry] = memo[entry]
    return StackReport(
        worst=worst, chain=chain, qualifiers=qual, external=sorted(_short(e) for e in external)
    )


def symbols(obj: "str | Path") -> tuple[list[str], list[str]]:
    """(writable data symbols, undefined symbols) of an object file, from `nm`."""
    out = subprocess.run(["nm", str(obj)], capture_output=True, text=True, check=True).stdout
    writable, undefined = [], []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == "U":
            undefined.append(parts[1])
        elif len(parts) == 3 and parts[1] in "DdBbCGgSs":
            writable.append(parts[2])
    return writable, undefined


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(
            "usage: python -m tickformer.codegen.evidence DIR  (a codegen output after `make`)",
            file=sys.stderr,
        )
        return 2
    d = Path(argv[0])
    report = stack_report(d / "tf_model.ci")
    for entry, nbytes in report.worst.items():
        print(f"stack {entry}: {nbytes} bytes worst case ({' -> '.join(report.chain[entry])})")
    print(f"frames: {', '.join(f'{k} {v}' for k, v in sorted(report.qualifiers.items()))}")
    print(f"external callees: {report.external or 'none'}; recursion: none")
    writable, undefined = symbols(d / "tf_model.o")
    print(f"writable data symbols: {writable or 'none'}; undefined symbols: {undefined or 'none'}")
    return 0 if not writable and set(undefined) <= ALLOWED_UNDEFINED else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))


def bytes_per_step(plan: "Plan") -> dict[str, int]:
    """Bytes one step must read (batch row by batch row, as the C step does): every weight of
    every layer, the input and output projections, one row of the positional table (and of the
    embedding), and every row of the K and V caches (static cache: all max_len rows, live or
    not; ring cache: the W slots, and per layer and head the W relative-position biases of this
    ring position; ssm block: its weights, and the state read and the state written).
    Scratch activations are a few KB and stay in L1; they are not counted."""
    cfg, d, f, n = plan.config, plan.d, plan.config.d_ff, plan.rows
    if plan.block_kind == "ssm":
        s = plan.d_state
        mixer = d * (d + 2 * s) + (d + 2 * s) + d * s + d + d * d + d  # z|B|C, a, d_skip, W_o
        layer = mixer + f * d + f + d * f + d + 4 * d  # + FFN, 2 LayerNorms
        io = (d + d * plan.d_out) if plan.tokens else (plan.d_in * d + d + d * plan.d_out + plan.d_out)
        weights = 4 * (cfg.n_layers * layer + io)
        state = 4 * 2 * cfg.n_layers * d * s  # read one buffer, write the other
        return {
            "weights": weights * plan.batch,
            "cache": state * plan.batch,
            "total": (weights + state) * plan.batch,
        }
    layer = 3 * d + d + f + d + 4 * d  # the float32 biases and 2 LayerNorms
    if plan.window is not None:
        layer += plan.heads * plan.window  # this ring position's bias row of every head
    io = (d + d * plan.d_out) if plan.tokens else (plan.d_in * d + d + d * plan.d_out + plan.d_out)
    pe = d if plan.window is None else 0  # one PE row (windowed models have none)
    fmt = plan.weight_format  # QKV, W_o, FFN matrices in their storage (codegen/weights.py); int8: + scales
    matrices = (d * 3 * d + d * d + f * d + d * f) * WEIGHT_BYTES[fmt] + (
        4 * (3 * d + d + f + d) if fmt == "int8" else 0
    )
    weights = 4 * (cfg.n_layers * layer + io + pe) + cfg.n_layers * matrices
    cache = 4 * 2 * cfg.n_layers * plan.heads * n * plan.dh
    return {
        "weights": weights * plan.batch,
        "cache": cache * plan.batch,
        "total": (weights + cache) * plan.batch,
    }
