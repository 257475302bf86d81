"""The verdict of a campaign: the EVT fit and its admissibility (certify/evt.py), the pWCET, and
PASS / FAIL / INCONCLUSIVE against the budget (`analyze`, `decide`).

Verdict, failing closed (MBPTA practice, Cucu-Grosjean et al. ECRTS 2012):
    FAIL          a step was observed over the budget (only an observation fails a campaign)
    PASS          observed max <= budget, admissible fit, pWCET and its bootstrap upper bound <= budget
    INCONCLUSIVE  otherwise (too few samples or extremes, failed i.i.d./fit tests, an admissible
                  pWCET or its upper bound over the budget with no step observed over it -- an
                  extrapolation alone -- a sliding stream whose timed steps missed a slot of the
                  ring or never wrapped), with the reasons, the conditions that would make the
                  campaign conclusive, and where the fit allows it the sample count it would
                  need (`samples_needed`).

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

from .evt import DEFAULT_EXCEEDANCES, METHODS, assess, fit_tail, min_samples, sample_count_problem
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


def check_sample_count(samples: int, evt_config: EvtConfig) -> None:
    """ConfigError unless `samples` is enough for `evt_config`'s tail fit: the rule the fit itself
    applies (evt.min_samples), applied before a campaign starts (`--samples`)."""
    problem = sample_count_problem(samples, evt_config.method, evt_config.block_size)
    if problem is not None:
        raise ConfigError(problem)


def decide(
    *,
    observed_max_ns: float,
    budget_ns: float,
    evt: dict[str, Any] | None,
    exceedance: float,
    fit_error: str | None = None,
    n: int | None = None,
    budget_exceedance: float | None = None,
) -> tuple[str, list[str], dict[str, Any] | None]:
    """The verdict, its reasons, and the sample count an INCONCLUSIVE campaign would need
    (`samples_needed`, else None), failing closed (module docstring). n: the sample count;
    budget_exceedance: the fit's per-step P(step > budget) (for `samples_needed`). Pure."""
    key = f"{exceedance:.0e}"
    status = pwcet_result(evt, fit_error, exceedance)
    failed = [] if evt is None else [t for t in evt["tests"] if not t["passed"]]
    withheld = [f"pWCET {status['text']}"] if not status["estimated"] else []
    details = [f"admissibility test failed: {t['name']} ({_test_brief(t)})" for t in failed]
    if observed_max_ns > budget_ns:
        return (
            FAIL,
            [f"observed max {observed_max_ns:.0f} ns exceeds the budget {budget_ns:.0f} ns", *withheld],
            None,
        )
    if evt is None or failed:
        return INCONCLUSIVE, [*withheld, *details], None
    pwcet = evt["pwcet_ns"].get(key)
    boot = evt.get("bootstrap") or {}
    upper = (boot.get("pwcet_upper_ns") or {}).get(key)
    orders = math.log10(1.0 / (n * exceedance)) if n else float("nan")
    if pwcet is None or not math.isfinite(pwcet) or pwcet > budget_ns:
        shown = "unbounded" if pwcet is None or not math.isfinite(pwcet) else f"{pwcet:.0f} ns"
        need = samples_needed(
            n=n, budget_ns=budget_ns, pwcet_ns=pwcet, upper_ns=upper, budget_exceedance=budget_exceedance
        )
        return (
            INCONCLUSIVE,
            [
                f"the admissible tail fit puts the pWCET at {key}/step at {shown}, over the budget "
                f"{budget_ns:.0f} ns, but no step was observed over it (observed max {observed_max_ns:.0f} ns): "
                f"an extrapolation {orders:.1f} orders of magnitude beyond the data is not an observed failure",
                *([need["text"]] if need else []),
            ],
            need,
        )
    if upper is None or not math.isfinite(upper) or upper > budget_ns:
        level = boot.get("level", 0.95)
        shown = "unbounded" if upper is None or not math.isfinite(upper) else f"{upper:.0f} ns"
        need = samples_needed(
            n=n, budget_ns=budget_ns, pwcet_ns=pwcet, upper_ns=upper, budget_exceedance=None
        )
        return (
            INCONCLUSIVE,
            [
                f"pWCET {pwcet:.0f} ns is within budget but its {level:.0%} bootstrap upper bound {shown} is not",
                *([need["text"]] if need else []),
            ],
            need,
        )
    return (
        PASS,
        [
            f"observed max {observed_max_ns:.0f} ns and pWCET {pwcet:.0f} ns (upper bound {upper:.0f} ns) at "
            f"{key}/step are within the budget {budget_ns:.0f} ns; all admissibility tests passed"
        ],
        None,
    )


CONFIDENCE = 0.95  # of seeing an exceedance in the campaign `samples_needed` proposes


def samples_needed(
    *,
    n: int | None,
    budget_ns: float,
    pwcet_ns: float | None,
    upper_ns: float | None,
    budget_exceedance: float | None,
) -> dict[str, Any] | None:
    """The sample count a campaign would need to decide, from the tail fit. Pure.

    - pWCET over the budget (no step observed over it): if the fit holds, P(step > budget) =
      q per step, and a campaign of ceil(ln(1/(1 - CONFIDENCE)) / q) steps observes an
      exceedance with probability CONFIDENCE (a FAIL on observation); if the fit does not hold,
      that campaign refits the tail with its data reaching that far.
    - pWCET within the budget, its bootstrap upper bound over it: the bootstrap interval of a
      fit from n samples narrows like 1/sqrt(n) (the shape's standard error), so the upper bound
      reaches the budget at about n ((upper - pWCET) / (budget - pWCET))^2 samples if the estimate
      holds.
    None when the fit gives no such number (no sample count, an unbounded bound)."""
    if n is None:
        return None
    if pwcet_ns is None or not math.isfinite(pwcet_ns) or pwcet_ns > budget_ns:
        if budget_exceedance is None or not budget_exceedance > 0:
            return None
        need = math.ceil(math.log(1.0 / (1.0 - CONFIDENCE)) / budget_exceedance)
        if need <= n:
            return {
                "samples": None,
                "rule": "observe an exceedance",
                "text": f"the fit puts P(step > budget) at {budget_exceedance:.2g}/step, so {need} steps should "
                f"have shown an exceedance with {CONFIDENCE:.0%} probability, and none of the {n} did: the fit "
                "does not describe the data near the budget",
            }
        return {
            "samples": need,
            "rule": "observe an exceedance",
            "text": f"the fit puts P(step > budget) at {budget_exceedance:.2g}/step: if it holds, a campaign of "
            f"{need:.3g} steps sees one with {CONFIDENCE:.0%} probability (a FAIL on observation); if it does "
            "not, that campaign's data reach the budget",
        }
    if upper_ns is None or not math.isfinite(upper_ns):
        return None
    need = math.ceil(n * ((upper_ns - pwcet_ns) / (budget_ns - pwcet_ns)) ** 2)
    return {
        "samples": max(need, n + 1),
        "rule": "narrow the bootstrap interval",
        "text": f"the bootstrap interval narrows like 1/sqrt(n): about {max(need, n + 1):.3g} samples would bring "
        "the upper bound within the budget if the estimate holds",
    }


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
    fit = None
    fit_error = sample_count_problem(x.size, evt_config.method, evt_config.block_size)
    try:
        if fit_error is None:
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
    budget_exceedance = (
        fit.exceedance_of(float(budget_ns))
        if fit is not None and evt is not None and evt["admissible"]
        else None
    )
    verdict, reasons, need = decide(
        observed_max_ns=st["max"],
        budget_ns=float(budget_ns),
        evt=evt,
        exceedance=evt_config.exceedance,
        fit_error=fit_error,
        n=int(x.size),
        budget_exceedance=budget_exceedance,
    )
    if need is None and evt is None and x.size < min_samples(evt_config.method, evt_config.block_size):
        need = {
            "samples": min_samples(evt_config.method, evt_config.block_size),
            "rule": "the minimum of a tail fit",
            "text": fit_error,
        }
    pw = pwcet_result(evt, fit_error, evt_config.exceedance)
    orders = math.log10(1.0 / (x.size * evt_config.exceedance))
    reach = {
        "observed_max_ns": st["max"],
        "pwcet_ns": pw.get("value_ns"),
        "pwcet_over_observed_max": (pw["value_ns"] / st["max"])
        if pw["estimated"] and pw.get("value_ns") is not None and st["max"] > 0
        else None,
        "extrapolation_orders": orders,
        "budget_exceedance_per_step": budget_exceedance,
        "text": _reach_text(st["max"], pw, orders, x.size, evt_config.exceedance),
    }
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
        "pwcet": pw,
        "reach": reach,
        "samples_needed": need,
        "evt": evt,
        "evt_error": fit_error,
        "evt_cross_check": cross,
        "extrapolation_orders": orders,
        "evt_config": {k: getattr(evt_config, k) for k in evt_config.__dataclass_fields__},
    }


def _reach_text(observed_max: float, pw: dict[str, Any], orders: float, n: int, p: float) -> str:
    """'observed max 12.3 us of 100000 steps; pWCET(1e-09) 15.0 us (1.22x the max), 4.0 orders of
    magnitude beyond the data (1/n = 1e-05 per step)'. Pure."""
    head = f"observed max {observed_max / 1e3:.1f} us of {n} steps"
    if not pw["estimated"] or pw.get("value_ns") is None:
        return f"{head}; pWCET({p:.0e}) {pw.get('text', 'not estimated')}"
    v = pw["value_ns"]
    return (
        f"{head}; pWCET({p:.0e}) {v / 1e3:.1f} us ({v / observed_max:.3g}x the max), an extrapolation "
        f"{orders:.1f} orders of magnitude beyond the data (1/n = {1 / n:.1e} per step)"
    )


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
