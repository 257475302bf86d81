"""The verdict of a campaign: the EVT fit and its admissibility (certify/evt.py), the pWCET, and
PASS / FAIL / INCONCLUSIVE against the budget (`analyze`, `decide`).

Verdict, failing closed (MBPTA practice, Cucu-Grosjean et al. ECRTS 2012):
    FAIL          observed max > budget, or an admissible pWCET at `exceedance` > budget
    PASS          observed max <= budget, admissible fit, pWCET and its bootstrap upper bound <= budget
    INCONCLUSIVE  otherwise (too few extremes, failed i.i.d./fit tests, upper bound over budget;
                  a sliding stream whose timed steps missed a slot of the ring or never wrapped),
                  with the reasons and the conditions that would make the campaign conclusive.

The pWCET is a result only when the tail fit passed every admissibility test: otherwise the
certificate's `pwcet` says "not estimated (reason)" (`pwcet_result`), the EVT table and the
cross-check carry no extrapolated latency, and the summary and plots say the same.

Not real-time code.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from tickformer import validation
from tickformer.errors import ConfigError, InputError

from .evt import DEFAULT_EXCEEDANCES, METHODS, assess, fit_tail
from .statistics import histogram, latency_stats, worst_indices

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"
EXIT_CODES = {PASS: 0, FAIL: 1, INCONCLUSIVE: 2}


@dataclass(frozen=True)
class EvtConfig:
    """How to estimate the tail and judge it (see certify/evt.py)."""

    method: str = "pot"
    exceedance: float = 1e-9
    tail_fraction: float = 0.01
    run_length: int = 3
    block_size: int = 100
    min_extremes: int = 50
    alpha: float = 0.05
    n_boot: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        validation.one_of(self.method, "EVT method", METHODS)
        validation.real(
            self.exceedance,
            "exceedance",
            min_value=0.0,
            max_value=1e-2,
            exclude_min=True,
            exclude_max=True,
            hint="a per-step probability, e.g. 1e-9",
        )
        validation.real(self.alpha, "alpha", min_value=0.0, max_value=0.5, exclude_min=True, exclude_max=True)
        for name in ("run_length", "block_size", "min_extremes", "n_boot"):
            validation.positive_int(getattr(self, name), name)
        if 1.0 / (self.n_boot + 1) >= self.alpha:  # the bootstrap p-value could never fall below alpha
            raise ConfigError(
                f"--n-boot {self.n_boot} is too few to reject a fit at alpha = {self.alpha}; "
                f"use at least {math.ceil(1 / self.alpha)} (default 200)"
            )

    def fit_kwargs(self) -> dict[str, Any]:
        if self.method == "pot":
            return {"tail_fraction": self.tail_fraction, "run_length": self.run_length}
        return {
            "block_size": self.block_size,
            "run_length": self.run_length,
            "tail_fraction": self.tail_fraction,
        }


def decide(
    *,
    observed_max_ns: float,
    budget_ns: float,
    evt: dict[str, Any] | None,
    exceedance: float,
    fit_error: str | None = None,
) -> tuple[str, list[str]]:
    """The verdict and its reasons, failing closed (module docstring). Pure."""
    key = f"{exceedance:.0e}"
    status = pwcet_result(evt, fit_error, exceedance)
    failed = [] if evt is None else [t for t in evt["tests"] if not t["passed"]]
    withheld = [f"pWCET {status['text']}"] if not status["estimated"] else []
    details = [f"admissibility test failed: {t['name']} ({_test_brief(t)})" for t in failed]
    if observed_max_ns > budget_ns:
        return FAIL, [
            f"observed max {observed_max_ns:.0f} ns exceeds the budget {budget_ns:.0f} ns",
            *withheld,
        ]
    if evt is None or failed:
        return INCONCLUSIVE, [*withheld, *details]
    pwcet = evt["pwcet_ns"].get(key)
    if pwcet is None or not math.isfinite(pwcet) or pwcet > budget_ns:
        shown = "unbounded" if pwcet is None or not math.isfinite(pwcet) else f"{pwcet:.0f} ns"
        return FAIL, [f"admissible pWCET at exceedance {key}/step is {shown} > budget {budget_ns:.0f} ns"]
    upper = (evt.get("bootstrap") or {}).get("pwcet_upper_ns", {}).get(key)
    if upper is None or not math.isfinite(upper) or upper > budget_ns:
        level = (evt.get("bootstrap") or {}).get("level", 0.95)
        shown = "unbounded" if upper is None or not math.isfinite(upper) else f"{upper:.0f} ns"
        return INCONCLUSIVE, [
            f"pWCET {pwcet:.0f} ns is within budget but its {level:.0%} bootstrap upper bound {shown} is not"
        ]
    return PASS, [
        f"observed max {observed_max_ns:.0f} ns and pWCET {pwcet:.0f} ns (upper bound {upper:.0f} ns) at "
        f"{key}/step are within the budget {budget_ns:.0f} ns; all admissibility tests passed"
    ]


def pwcet_result(evt: dict[str, Any] | None, fit_error: str | None, exceedance: float) -> dict[str, Any]:
    """The certificate's `pwcet` at `exceedance`: {"estimated": True, "value_ns", "upper_ns",
    "level"} from an admissible fit, else {"estimated": False, "reason", "text": "not estimated
    (reason)"}; never an extrapolation from an inadmissible fit. Pure."""
    key = f"{exceedance:.0e}"
    out: dict[str, Any] = {"exceedance": exceedance}
    if evt is None:
        reason = f"no EVT fit: {fit_error or 'tail fit failed'}"
    elif not all(t["passed"] for t in evt["tests"]) or evt.get("pwcet_ns") is None:
        failed = [t["name"] for t in evt["tests"] if not t["passed"]]
        reason = evt.get("pwcet_withheld") or "admissibility failed: " + ", ".join(failed)
    else:
        boot = evt.get("bootstrap") or {}
        value, upper = evt["pwcet_ns"].get(key), (boot.get("pwcet_upper_ns") or {}).get(key)
        return {**out, "estimated": True, "value_ns": value, "upper_ns": upper, "level": boot.get("level")}
    return {**out, "estimated": False, "reason": reason, "text": f"not estimated ({reason})"}


def _test_brief(t: dict[str, Any]) -> str:
    p = t.get("p_value")
    return f"p = {p:.3g}; {t['detail']}" if p is not None else t["detail"]


ADVICE = (
    "to make the campaign conclusive: run on an otherwise idle machine; pin to an isolated core "
    "(--cpu K with isolcpus/nohz_full, performance governor); grant --realtime (CAP_SYS_NICE for "
    "SCHED_FIFO, CAP_IPC_LOCK or a higher RLIMIT_MEMLOCK for mlockall); collect more samples "
    "(--samples); if independence fails, decluster with a longer --run-length or use --method bm"
)


# ----------------------------------------------------------------------------- analysis


def analyze(
    durations_ns: np.ndarray, *, budget_ns: float, evt_config: EvtConfig = EvtConfig(), hist_bins: int = 100
) -> dict[str, Any]:
    """Statistics, EVT fit + admissibility, verdict for a vector of step latencies. Not real-time."""
    if not (isinstance(budget_ns, (int, float)) and budget_ns > 0 and math.isfinite(budget_ns)):
        raise ConfigError(f"budget {budget_ns!r} ns must be a positive finite number")
    x = np.asarray(durations_ns, dtype=np.float64).ravel()  # [n]
    st = latency_stats(x)
    exceedances = tuple(sorted(set(DEFAULT_EXCEEDANCES) | {evt_config.exceedance}, reverse=True))
    evt: dict[str, Any] | None = None
    fit_error = None
    try:
        fit = fit_tail(x, method=evt_config.method, **evt_config.fit_kwargs())
        evt = assess(
            fit,
            min_extremes=evt_config.min_extremes,
            alpha=evt_config.alpha,
            n_boot=evt_config.n_boot,
            exceedances=exceedances,
            seed=evt_config.seed,
        )
    except (InputError, ConfigError, ValueError, RuntimeError, FloatingPointError) as exc:
        fit_error = str(exc)
    cross = _cross_check(x, evt_config, exceedances, primary=evt)
    verdict, reasons = decide(
        observed_max_ns=st["max"],
        budget_ns=float(budget_ns),
        evt=evt,
        exceedance=evt_config.exceedance,
        fit_error=fit_error,
    )
    return {
        "verdict": verdict,
        "exit_code": EXIT_CODES[verdict],
        "reasons": reasons,
        "advice": ADVICE if verdict == INCONCLUSIVE else None,
        "budget_ns": float(budget_ns),
        "exceedance": evt_config.exceedance,
        "stats": st,
        "over_budget": int(np.count_nonzero(x > budget_ns)),
        "histogram": histogram(
            x, bins=hist_bins, hi_ns=max(2.0 * st["p99.99"], min(float(budget_ns), 10.0 * st["p99.99"]))
        ),
        "worst": worst_indices(x),
        "pwcet": pwcet_result(evt, fit_error, evt_config.exceedance),
        "evt": evt,
        "evt_error": fit_error,
        "evt_cross_check": cross,
        "extrapolation_orders": math.log10(1.0 / (x.size * evt_config.exceedance)),
        "evt_config": {k: getattr(evt_config, k) for k in evt_config.__dataclass_fields__},
    }


def _cross_check(
    x: np.ndarray, evt_config: EvtConfig, exceedances: tuple[float, ...], primary: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The other EVT method's estimates, for information only (not part of the verdict): a large
    disagreement between POT and block maxima says the tail model is uncertain. Its pWCETs are
    given only when the primary fit is admissible (they are not tested themselves)."""
    other = "bm" if evt_config.method == "pot" else "pot"
    if primary is None or primary.get("pwcet_ns") is None:
        return {
            "method": other,
            "pwcet_ns": None,
            "withheld": "not estimated (the primary tail fit is not admissible)",
            "used_for_verdict": False,
        }
    kwargs = EvtConfig(
        method=other,
        run_length=evt_config.run_length,
        block_size=evt_config.block_size,
        tail_fraction=evt_config.tail_fraction,
    ).fit_kwargs()
    try:
        fit = fit_tail(x, method=other, **kwargs)
    except (InputError, ConfigError, ValueError, RuntimeError, FloatingPointError) as exc:
        return {"method": other, "error": str(exc)}
    pw = {}
    for p in exceedances:
        try:
            pw[f"{p:.0e}"] = fit.quantile(p)
        except ConfigError:
            pw[f"{p:.0e}"] = None
    return {"method": other, "xi": fit.xi, "tail": fit.tail_kind, "pwcet_ns": pw, "used_for_verdict": False}
