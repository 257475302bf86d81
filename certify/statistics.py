"""Statistics of a campaign's latencies: min, mean, p50 ... p99.99, max, std (percentiles with
numpy's "higher" method: always an observed sample, never interpolated downwards), a fixed-width
histogram with an explicit overflow bucket, the worst samples in time order, and the evidence
about positions (the latency per position group, where a sliding stream's timed steps fell on
the ring, whether the timed positions include the worst case). pWCET: certify/evt.py.

Not real-time code.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tickformer.contracts.ring_buffer import ring_slot
from tickformer.errors import InputError

PERCENTILES = (("p50", 50.0), ("p90", 90.0), ("p99", 99.0), ("p99.9", 99.9), ("p99.99", 99.99))


def latency_stats(samples_ns: Any) -> dict[str, float | int]:
    """min, mean, p50..p99.99 ("higher": observed samples), max, std (ddof=1), n. Not real-time."""
    x = np.asarray(samples_ns, dtype=np.float64).ravel()  # [n]
    if x.size < 2:
        raise InputError(f"{x.size} samples: statistics need at least 2")
    out: dict[str, float | int] = {"n": int(x.size), "min": float(x.min()), "mean": float(x.mean())}
    for name, q in PERCENTILES:
        out[name] = float(np.percentile(x, q, method="higher"))
    out["max"] = float(x.max())
    out["std"] = float(x.std(ddof=1))
    return out


def histogram(samples_ns: Any, *, bins: int = 100, hi_ns: float | None = None) -> dict[str, Any]:
    """Fixed-width histogram from floor(min) to hi_ns with an explicit overflow bucket (> hi_ns).

    hi_ns defaults to 2 x p99.99. Counts sum (with overflow) to n.
    """
    x = np.asarray(samples_ns, dtype=np.float64).ravel()  # [n]
    lo = math.floor(float(x.min()))
    if hi_ns is None:
        hi_ns = 2.0 * float(np.percentile(x, 99.99, method="higher"))
    hi = max(float(hi_ns), lo + bins)  # at least 1 ns per bin
    edges = np.linspace(lo, hi, bins + 1)  # [bins + 1]
    inside = x[x <= hi]  # [m]
    counts, _ = np.histogram(inside, bins=edges)  # [bins]
    return {
        "lo_ns": lo,
        "hi_ns": hi,
        "bin_ns": (hi - lo) / bins,
        "edges_ns": edges.tolist(),
        "counts": counts.astype(int).tolist(),
        "overflow": int(np.count_nonzero(x > hi)),
        "overflow_means": f"samples > {hi:.0f} ns",
    }


def worst_indices(samples_ns: Any, k: int = 10) -> list[dict[str, int]]:
    """The k largest samples with their index in time order (largest first)."""
    x = np.asarray(samples_ns).ravel()  # [n]
    k = min(k, x.size)
    idx = np.argpartition(x, x.size - k)[x.size - k :]  # [k]
    idx = idx[np.argsort(x[idx])[::-1]]
    return [{"index": int(i), "ns": int(x[i])} for i in idx]


def position_profile(
    durations: np.ndarray, positions: np.ndarray, max_len: int, groups: int = 8
) -> dict[str, Any]:
    """Median and max latency per position group: the evidence for (or against) constant cost."""
    edges = np.linspace(0, max_len, groups + 1).astype(int)  # [groups + 1]
    rows: list[dict[str, Any]] = []
    med: list[float] = []
    for a, b in zip(edges[:-1], edges[1:]):
        sel = durations[(positions >= a) & (positions < b)]
        if sel.size:
            med.append(float(np.median(sel)))
            rows.append(
                {
                    "positions": [int(a), int(b) - 1],
                    "n": int(sel.size),
                    "p50_ns": med[-1],
                    "max_ns": float(sel.max()),
                }
            )
    ratio = (med[-1] / med[0]) if len(med) >= 2 and med[0] > 0 else None
    return {"groups": rows, "last_over_first_p50": ratio}


def ring_coverage(durations: np.ndarray, positions: np.ndarray, window: int) -> dict[str, Any]:
    """Where the timed steps of a sliding stream fell on the ring of W slots: every slot timed?
    how many wraps? and the latency per slot group (contracts.ring_buffer.ring_slot). Evidence that
    the wrap-around costs what every other step costs."""
    slots = ring_slot(positions, window)  # [samples] in [0, W)
    counts = np.bincount(slots, minlength=window)  # [W]
    first, last = (int(positions.min()), int(positions.max())) if positions.size else (0, 0)
    timed = int(np.count_nonzero(counts))
    wraps = (last // window) - (first // window)
    every = timed == window
    claim = "one unbounded stream, never reset: " + (
        f"the ring cache wraps ({wraps} times) and every slot is timed"
        if every and wraps > 0
        else f"every slot is timed but the ring never wraps (positions {first}..{last})"
        if every
        else f"only {timed} of the {window} slots of the ring are timed (positions {first}..{last}): the "
        "campaign does not cover every slot"
    )
    return {
        "window": window,
        "claim": claim,
        "every_slot_timed": every,
        "covered": every and wraps > 0,
        "slots_timed": timed,
        "timed_per_slot": [int(counts.min()), int(counts.max())],
        "positions": [first, last],
        "wraps": wraps,
        "slot_profile": position_profile(durations, slots, window, groups=min(8, window)),
    }


def position_check(
    static_cache: bool,
    durations: np.ndarray,
    positions: np.ndarray,
    max_len: int,
    sweep: dict[str, Any] | None,
    start: int,
    tolerance: float = 1.2,
) -> dict[str, Any]:
    """Evidence that the timed positions include the worst case (informational, in the certificate).

    Static cache: the median of the last eighth of positions should be within `tolerance` x the
    first eighth's (constant cost). Growing cache: in the sweep, the group with the highest median
    should lie in the timed range [start, max_len)."""
    if static_cache:
        ratio = position_profile(durations, positions, max_len)["last_over_first_p50"]
        ok = ratio is None or ratio <= tolerance
        return {
            "claim": "constant cost at every position",
            "last_over_first_p50": ratio,
            "tolerance": tolerance,
            "consistent": bool(ok),
        }
    groups = (sweep or {}).get("groups", [])
    worst = max(groups, key=lambda g: g["p50_ns"]) if groups else None
    ok = worst is not None and worst["positions"][1] >= start
    return {
        "claim": "cost grows with position; only the last positions are timed",
        "sweep": sweep,
        "worst_group": None if worst is None else worst["positions"],
        "timed_from": start,
        "consistent": bool(ok),
    }
