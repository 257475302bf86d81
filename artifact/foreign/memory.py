"""The memory a bare model's declared shapes need at the sizes verify and certify try, against
the run's memory budget (tickformer.runtime.budget): a declared [1, 2^20, 2^16] float32 input
(256 GiB) is refused before anything is allocated, naming the input, its shape and size, and the
fix.

    tensor_bytes(sig, sizes)     {tensor: bytes} of every input (a state input: its reset state)
                                 and every output whose shape the sizes fix
    over_memory(sig, budget)     the one-line reason the largest sizes do not fit, or None
    check_memory(sig, budget)    ConfigError with that reason

COPIES: a check holds a few copies of its inputs and outputs at once (the example, a changed
copy, both outputs, the engine's own), so the declared tensors must fit COPIES times over.
Pure functions. Not real-time code.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tickformer.errors import ConfigError

COPIES = 4


def _shape(t: Any, sizes: dict[str, int]) -> tuple[int, ...] | None:
    out = []
    for a, (d, g) in enumerate(zip(t.dims, t.groups)):
        if getattr(t, "role", None) == "state" and a == t.time_axis:
            out.append(0)
        elif isinstance(d, int):
            out.append(d)
        elif g is not None and g in sizes:
            out.append(sizes[g])
        else:
            return None
    return tuple(out)


def tensor_bytes(sig: Any, sizes: dict[str, int]) -> dict[str, int]:
    """{tensor: bytes} at `sizes` (module docstring); tensors of unknown shape are left out."""
    out = {}
    for t in [*sig.inputs, *sig.outputs]:
        shape = _shape(t, sizes)
        if shape is not None:
            out[t.name] = int(np.prod(shape, dtype=object)) * np.dtype(t.dtype).itemsize
    return out


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.3g} GiB" if n >= 1 << 26 else f"{n / (1 << 20):.3g} MiB"


def over_memory(sig: Any, budget: int | None, sizes: dict[str, int] | None = None) -> str | None:
    """Why the tensors at the largest sizes tried (or at `sizes`) do not fit COPIES times in
    `budget`, or None."""
    if budget is None:
        return None
    top = {g: hi for g, (_, hi) in sig.ranges.items()}
    top.update(sizes or {})
    sizes = tensor_bytes(sig, top)
    total = sum(sizes.values())
    if total * COPIES <= budget:
        return None
    name, largest = max(sizes.items(), key=lambda kv: kv[1])
    t = next(x for x in [*sig.inputs, *sig.outputs] if x.name == name)
    shape = _shape(t, top)
    kind = "input" if any(i.name == name for i in sig.inputs) else "output"
    dynamic = [g for g in t.groups if g is not None and g in sig.dynamic]
    fix = (
        f"declare smaller sizes for {dynamic} in a spec file ([axes])"
        if dynamic
        else "re-export it with a smaller static shape, or with that axis dynamic (a dim_param name)"
    )
    return (
        f"{kind} {name} {t.dtype}{list(shape or ())} is {_gib(largest)} at the sizes tried ({_gib(total)} for every "
        f"declared tensor, x{COPIES} for the copies a check holds), over the memory budget of {_gib(budget)}: "
        f"{fix}, or raise --memory-budget GIB"
    )


def check_memory(sig: Any, budget: int | None, sizes: dict[str, int] | None = None) -> None:
    """ConfigError naming the tensor when the declared shapes do not fit (over_memory)."""
    reason = over_memory(sig, budget, sizes)
    if reason is not None:
        raise ConfigError(reason)
