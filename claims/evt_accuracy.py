"""The EVT accuracy and calibration figures of docs/certify.md, measured (a few minutes).

    python claims/evt_accuracy.py --out claims/results/evt_accuracy.json [--seeds 30] [--n 1000000]

Accuracy: for each synthetic i.i.d. distribution of tests/certify/test_evt.py (CASES: Gumbel,
Weibull-type, GPD) and each seed, n samples, the default POT fit (certify/evt.py), and at each p
the error relative to the part EVT extrapolates, err = (estimate - q_true(p)) / (q_true(p) -
median); bias (mean) and sd (ddof 1) over the seeds.

Calibration of the bootstrap Anderson-Darling test: `--calib` replicates of pure GPD samples
(xi = 0.2; 20 000 samples, so the 1% threshold leaves 200 exceedances), each fitted and assessed
with `--calib-boot` refits; the p-values' KS distance from uniform and the fraction below 0.05.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

ROOT = Path(__file__).resolve().parent.parent


def _cases() -> dict:
    spec = importlib.util.spec_from_file_location("_evt_cases", ROOT / "tests" / "certify" / "test_evt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CASES


def accuracy(seeds: int, n: int) -> dict:
    from tickformer.certify.evt import fit_tail

    out = {}
    for name, (dist, tols, _) in _cases().items():
        errs: dict[str, list[float]] = {f"{p:.0e}": [] for p in tols}
        median = float(dist.median())
        for seed in range(seeds):
            x = dist.rvs(size=n, random_state=np.random.default_rng(1000 + seed))
            fit = fit_tail(x)
            for p in tols:
                true = float(dist.isf(p))
                errs[f"{p:.0e}"].append((fit.quantile(p) - true) / (true - median))
        out[name] = {
            p: {"bias": float(np.mean(e)), "sd": float(np.std(e, ddof=1)), "n_seeds": len(e)}
            for p, e in errs.items()
        }
        print(name, {p: (round(v["bias"], 3), round(v["sd"], 3)) for p, v in out[name].items()}, flush=True)
    return out


def calibration(reps: int, n_boot: int) -> dict:
    from tickformer.certify.evt import assess, fit_tail

    pvals = []
    for i in range(reps):
        x = stats.genpareto(c=0.2, loc=40_000, scale=3_000).rvs(
            size=20_000, random_state=np.random.default_rng(i)
        )
        gof = [
            t for t in assess(fit_tail(x), n_boot=n_boot, seed=i)["tests"] if t["name"].startswith("goodness")
        ]
        pvals.append(gof[0]["p_value"])
    p = np.asarray(pvals, dtype=float)
    return {
        "replicates": reps,
        "n_boot": n_boot,
        "ks_uniform_p": float(stats.kstest(p, "uniform").pvalue),
        "fraction_below_0.05": float(np.mean(p < 0.05)),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, default=30)
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--calib", type=int, default=100)
    ap.add_argument("--calib-boot", type=int, default=100)
    args = ap.parse_args(argv)
    start, t0 = _dt.datetime.now(_dt.timezone.utc), time.perf_counter()
    data = {
        "utc": start.isoformat(timespec="seconds"),
        "command": "python claims/evt_accuracy.py " + " ".join(sys.argv[1:]),
        "n": args.n,
        "accuracy": accuracy(args.seeds, args.n),
        "calibration": calibration(args.calib, args.calib_boot),
    }
    data["wall_s"] = round(time.perf_counter() - t0, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=2) + "\n")
    print(json.dumps(data["calibration"]), f"{data['wall_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
