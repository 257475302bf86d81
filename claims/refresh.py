"""The refreshes that are more than one command (claims/claims.toml [results]: `refresh = NAME`).

`python claims/check.py --refresh NAME` runs a results file's `command`, or the function here its
`refresh` names, then re-renders the documents' numbers from the new file. Each takes minutes
or more; `demo` and `test-tiers` change committed results. Not part of the package.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
TICKFORMER = str(Path(PY).with_name("tickformer"))


def run(command: str | list[str], check: bool = True) -> None:
    """A command line of claims.toml (`python` and `tickformer` are the venv's), in the repository."""
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    argv[0] = {"python": PY, "tickformer": TICKFORMER}.get(argv[0], argv[0])
    print("+ " + shlex.join(argv), flush=True)
    subprocess.run(argv, cwd=ROOT, check=check)


def _write_json(path: str, data: dict, indent: int = 2) -> None:
    (ROOT / path).parent.mkdir(parents=True, exist_ok=True)
    (ROOT / path).write_text(json.dumps(data, indent=indent) + "\n")


def _slim_certificate(src: Path, dst: str) -> None:
    cert = json.loads(src.read_text())
    cert.pop("files", None)
    _write_json(dst, cert, indent=1)


def demo() -> None:
    """The demo, then the certification campaigns of docs/certify.md on its artifact (minutes)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "demo"
        run(["tickformer", "demo", "--out", str(out)])
        _write_json(
            "claims/results/demo/demo_summary.json", json.loads((out / "demo_summary.json").read_text())
        )
        _slim_certificate(out / "certify" / "certificate.json", "claims/results/demo/certificate.json")
        for plot in ("tracking.png", "latency.png"):  # docs/control.md shows them
            shutil.copyfile(out / plot, ROOT / "claims/results/demo" / plot)
        art = str(out / "artifact")
        for name, args in {
            "c1": [art, "--budget-us", "1000", "--samples", "50000"],
            "c3": [art, "--budget-us", "1000", "--samples", "20000", "--cpu", "1", "--realtime"],
        }.items():
            _campaign(name, args, Path(tmp))
        tiny = Path(tmp) / "tiny_art"
        run(
            [
                "python",
                "-c",
                "from tickformer.export.writer import export_params; from tickformer.model import "
                f"init_params, preset; c = preset('tiny'); export_params(c, init_params(c, 1), {str(tiny)!r})",
            ]
        )
        growing = [
            "--backend",
            "numpy-growing",
            "--budget-us",
            "100000",
            "--samples",
            "2000",
            "--n-boot",
            "20",
        ]
        _campaign("c_grow", [str(tiny), *growing], Path(tmp))


def _campaign(name: str, args: list[str], tmp: Path) -> None:
    """`tickformer certify` into claims/results/certify/NAME.json (over budget exits non-zero: kept)."""
    run(["tickformer", "certify", *args, "--quiet", "--out", str(tmp / name)], check=False)
    _slim_certificate(tmp / name / "certificate.json", f"claims/results/certify/{name}.json")


def test_tiers() -> None:
    """`make test` and `make check` timed from a warm venv (installed: make's stamp is current, so
    neither target installs anything), with the machine's load beside them."""
    record: dict = {"cpu_count": os.cpu_count(), "machine": platform.processor() or platform.machine()}
    subprocess.run(["make", ".venv/.installed"], cwd=ROOT, check=True, capture_output=True)
    for target in ("test", "check"):
        load = os.getloadavg()
        t0 = time.perf_counter()
        done = subprocess.run(["make", target], cwd=ROOT, capture_output=True, text=True)
        record[f"make_{target}"] = {
            "wall_s": round(time.perf_counter() - t0, 1),
            "exit": done.returncode,  # the first refresh's claims test fails on this file's absence
            "summary": (done.stdout.strip().splitlines() or [""])[-1],
            "load_average_before": [round(v, 2) for v in load],
        }
    record["utc"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    record["command"] = "python claims/check.py --refresh test-tiers (make test, make check; warm venv)"
    _write_json("claims/results/test_tiers.json", record)


def _stamped(command: str, path: str) -> None:
    """`command`, then its command line recorded in the JSON it wrote (which has its own utc)."""
    run(command)
    data = json.loads((ROOT / path).read_text())
    data["command"] = command
    _write_json(path, data)


def prove() -> None:
    """The CrossHair proofs and their twins; docs/assurance.md rendered by the same run."""
    _stamped(
        "tickformer prove --json claims/results/prove.json --assurance --assurance-out docs/assurance.md",
        "claims/results/prove.json",
    )


def ieee754() -> None:
    """The binary32 SMT report (the check then re-renders docs/assurance.md with it)."""
    _stamped("tickformer prove --ieee754 --json claims/results/ieee754.json", "claims/results/ieee754.json")


def control_side_runs() -> None:
    """docs/control.md's recipe side runs, each by the command recorded with it (minutes each)."""
    data = json.loads((ROOT / "experiments/results/control_side_runs.json").read_text())
    for side_run in data["recipe"].values():
        run(["python", *shlex.split(side_run["command"])[1:]])


def per_batch_vs_2d() -> tuple[float, float]:
    """docs/training.md's command: the share of entries where x @ w (3-D, BLAS per batch row) and the
    2-D product over all rows differ, and the largest difference relative to max |x @ w|."""
    import numpy as np

    r = np.random.default_rng(0)
    x = r.standard_normal((64, 9, 64), dtype=np.float32)
    w = r.standard_normal((64, 64), dtype=np.float32)
    d = x @ w - (x.reshape(-1, 64) @ w).reshape(x.shape)
    return float(np.mean(d != 0)), float(np.abs(d).max() / np.abs(x @ w).max())


def matmul() -> None:
    """Adds (or replaces) this machine's line in claims/results/matmul_rounding.json; other machines'
    lines stay (which kernels BLAS picks depends on the CPU: the share is one machine's fact)."""
    path = "claims/results/matmul_rounding.json"
    data = json.loads((ROOT / path).read_text()) if (ROOT / path).exists() else {"machines": {}}
    names = [ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo") if ln.startswith("model name")]
    cpu = names[0] if names else platform.processor() or platform.machine()
    share, rel = per_batch_vs_2d()
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    key = re.sub(r"[^a-z0-9]+", "_", cpu.lower()).strip("_")
    data["machines"][key] = {
        "cpu_model": cpu,
        "share": share,
        "max_rel": rel,
        "utc": now,
        "source": "refresh",
    }
    data["utc"] = now
    data["command"] = "python claims/check.py --refresh matmul (docs/training.md's python -c command)"
    _write_json(path, data)
