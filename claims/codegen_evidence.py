"""The evidence figures of docs/codegen.md, measured on the control artifact (about a minute;
`--expcheck` adds the exhaustive exp check, about a minute more; `--frama-c` adds Frama-C EVA,
about four minutes), or with `--subject windowed` on the windowed control model (preset
`control-hidden`, window 32: a ring cache) or `--subject ssm` (preset `control` with the ssm
block, d_state 16) -- the same steps but the native-build stack, cppcheck timing, first load and
exp check (for ssm, `--expcheck` runs the exhaustive `make ssmcheck` instead).

    python claims/codegen_evidence.py --out claims/results/codegen_evidence.json [--expcheck] [--frama-c]
    python claims/codegen_evidence.py --subject windowed --out claims/results/codegen_windowed.json [--frama-c]
    python claims/codegen_evidence.py --subject ssm --out claims/results/codegen_ssm.json [--expcheck] [--frama-c]

Steps, each the command docs/codegen.md names (ART: the control preset, init_params seed 0):
  1. `tickformer codegen ART --out C --test`: tf_test's golden line (steps, max |c - r|, normwise
     error in u), "tf_test: all checks passed" per build, cppcheck and the sampled exp check;
  2. `python -m tickformer.codegen.evidence C` (after `make test` built tf_model.o): worst-case
     stack per entry point, the deepest chain and each frame of it (tf_model.su), symbols, and
     `size tf_model.o`; the same for a second output built with `make tf_model.o ARCH=-march=native`;
  3. `make -C C cppcheck`, timed;
  4. the first load of the `c` backend (generation + compilation) and a cached one, timed;
  5. optional: `make -C C expcheck` (all 2^32 float32), `make -C C frama-c` (EVA), timed.
Only figures parsed from those outputs are recorded, with the raw lines they came from.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TICK = str(Path(sys.executable).with_name("tickformer"))


def _sh(cmd: list[str], **kw) -> tuple[str, float, float]:
    """stdout+stderr, wall seconds and children's CPU seconds of one command (which must succeed)."""
    print("+ " + " ".join(cmd), flush=True)
    before = os.times()
    start = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    wall = time.monotonic() - start
    after = os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{out[-2000:]}")
    return out, round(wall, 2), round(cpu, 2)


def _line(out: str, prefix: str) -> str:
    return next(line for line in out.splitlines() if line.startswith(prefix))


def _num(pattern: str, text: str, kind=float):
    m = re.search(pattern, text)
    if m is None:
        raise SystemExit(f"{pattern!r} not found in {text!r}")
    return kind(m.group(1).replace(",", ""))


def golden(out: str) -> dict:
    line = _line(out, "golden:")
    return {
        "line": line,
        "steps": _num(r"golden: (\d+) steps", line, int),
        "atol": _num(r"atol ([\d.e+-]+)", line),
        "rtol": _num(r"rtol ([\d.e+-]+)", line),
        "max_abs": _num(r"max \|c - r\| = ([\d.e+-]+)", line),
        "normwise_u": _num(r"normwise ([\d.]+) u", line),
        "bound_u": _num(r"bound ([\d.]+) u", line),
    }


def exp_line(out: str) -> dict:
    line = _line(out, "exp:")
    return {
        "line": line,
        "values": _num(r"exp: (\d+) values", line, int),
        "stride": _num(r"\(stride (\d+)\)", line, int),
        "max_ulp": _num(r"max error ([\d.]+) ulp", line),
        "at_x": float.fromhex(_num(r"at x = (\S+);", line, str)),
        "others": _num(r"; (\d+) others", line, int),
        "wrong": _num(r": (\d+) wrong", line, int),
    }


def stack(directory: Path) -> dict:
    from tickformer.codegen import evidence

    report = evidence.stack_report(directory / "tf_model.ci")
    frames = {}
    for line in (directory / "tf_model.su").read_text().splitlines():
        where, nbytes, qual = line.split("\t")
        frames[where.rsplit(":", 1)[-1]] = {"bytes": int(nbytes), "qualifier": qual}
    writable, undefined = evidence.symbols(directory / "tf_model.o")
    size_out, _, _ = _sh(["size", str(directory / "tf_model.o")])
    text, data, bss = (int(v) for v in size_out.splitlines()[1].split()[:3])
    ev_out, _, _ = _sh([sys.executable, "-m", "tickformer.codegen.evidence", str(directory)])
    return {
        "worst": report.worst,
        "chain": report.chain,
        "chain_frames": {e: [frames[f]["bytes"] for f in report.chain[e]] for e in report.chain},
        "qualifiers": sorted(set(report.qualifiers.values())),
        "external": report.external,
        "writable_symbols": writable,
        "undefined_symbols": undefined,
        "size": {"text": text, "data": data, "bss": bss},
        "evidence_output": ev_out.strip().splitlines(),
    }


def first_load(art: Path) -> dict:
    code = (
        "import tempfile, time; from tickformer import runtime; d = tempfile.mkdtemp(); t = time.perf_counter();"
        f" runtime.load({str(art)!r}, backend='c', cache_dir=d); u = time.perf_counter();"
        f" runtime.load({str(art)!r}, backend='c', cache_dir=d); print(u - t, time.perf_counter() - u)"
    )
    out, _, _ = _sh([sys.executable, "-c", code])
    first, cached = (float(v) for v in out.split()[-2:])
    return {"first_s": first, "cached_s": cached}


def frama_c(out: str, wall: float, cpu: float) -> dict:
    summary = out[out.index("ANALYSIS SUMMARY") :] if "ANALYSIS SUMMARY" in out else out

    def get(pattern: str):  # None where EVA's summary is worded otherwise (its raw lines are kept)
        m = re.search(pattern, summary)
        return int(m.group(1)) if m else None

    return {
        "summary": summary.strip().splitlines(),
        "functions_analyzed": get(r"(\d+) functions analyzed"),
        "functions_total": get(r"analyzed \(out of (\d+)\)"),
        "alarms": get(r"(\d+) alarms? generated"),
        "assertions_unknown": get(r"Assertions\s+\d+ valid\s+(\d+) unknown"),
        "assertions_total": get(r"Assertions.*?(\d+) total"),
        "preconditions_valid": get(r"Preconditions\s+(\d+) valid"),
        "preconditions_total": get(r"Preconditions.*?(\d+) total"),
        "passed": "EVA raised no alarm" in out,
        "wall_s": wall,
        "cpu_s": cpu,
    }


def eva_output_range(directory: Path) -> list[float] | None:
    """The widest interval EVA gives an element of the step's output y (tf_eva.log, final values
    of tf_eva_main)."""
    log = (directory / "tf_eva.log").read_text()
    if "Values at end of function tf_eva_main:" not in log:
        return None
    lines = log.split("Values at end of function tf_eva_main:")[-1].splitlines()[1:]
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("y[")), None)
    if start is None:
        return None
    intervals = []
    for line in lines[start:]:
        if not (line.strip().startswith("y[") or line.strip().startswith("[")):
            break
        m = re.search(r"\[(-?[\d.]+) \.\. (-?[\d.]+)\]", line)
        if m:
            intervals.append((float(m.group(1)), float(m.group(2))))
    return [min(lo for lo, _ in intervals), max(hi for _, hi in intervals)] if intervals else None


def plan_figures(art: Path) -> dict:
    """What the generator derives from the artifact: EVA's loop unrolling, the analytic output
    bound the step checks, the bytes one step reads (the bandwidth floor's numerator)."""
    from tickformer.artifact import open_artifact
    from tickformer.codegen import evidence, plan, testprog

    p = plan.plan_for(open_artifact(art))
    return {
        "eva_unroll": testprog.eva_unroll(p),
        "output_bound": p.output_bound,
        "bytes_per_step": evidence.bytes_per_step(p),
    }


def save(out: Path, data: dict, command: str) -> None:
    """Write what is measured so far (after each stage: a long stage cut short keeps the others)."""
    gcc, _, _ = _sh(["gcc", "--version"])
    data.update(
        utc=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        commit=subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip(),
        command=command,
        gcc=gcc.splitlines()[0],
        load_average_after=[round(x, 2) for x in os.getloadavg()],
    )
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    tmp.replace(out)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--expcheck", action="store_true", help="also the exhaustive exp check (~1 min)")
    parser.add_argument("--frama-c", action="store_true", help="also Frama-C EVA (~4 min)")
    parser.add_argument(
        "--subject", choices=sorted(SUBJECTS), default="control", help="the model (module docstring)"
    )
    args = parser.parse_args()
    command = (
        "python claims/codegen_evidence.py"
        + ("" if args.subject == "control" else f" --subject {args.subject}")
        + f" --out {args.out}"
        + (" --expcheck" if args.expcheck else "")
        + (" --frama-c" if args.frama_c else "")
    )
    if args.subject != "control":
        return other_subject(args, command)
    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset

    data: dict = {"load_average_before": [round(x, 2) for x in os.getloadavg()]}
    with tempfile.TemporaryDirectory() as tmp:
        art, c_dir, native = Path(tmp) / "control-art", Path(tmp) / "control-c", Path(tmp) / "control-native"
        export_params(preset("control"), init_params(preset("control"), 0), art)
        out, wall, cpu = _sh([TICK, "codegen", str(art), "--out", str(c_dir), "--test"])
        data["codegen_test"] = {
            "golden": golden(out),
            "all_checks_passed": out.count("tf_test: all checks passed"),
            "cppcheck_no_findings": "cppcheck: no findings" in out,
            "exp_sampled": exp_line(out),
            "wall_s": wall,
            "cpu_s": cpu,
        }
        data["stack"] = stack(c_dir)
        _sh([TICK, "codegen", str(art), "--out", str(native)])
        _sh(["make", "-C", str(native), "tf_model.o", "ARCH=-march=native"])
        data["stack_native"] = stack(native)
        _sh(["make", "-C", str(c_dir), "tf_model.o"])  # up to date: the cppcheck timing alone below
        out, wall, cpu = _sh(["make", "-C", str(c_dir), "cppcheck"])
        data["cppcheck"] = {"no_findings": "cppcheck: no findings" in out, "wall_s": wall, "cpu_s": cpu}
        data["first_load"] = first_load(art)
        data["plan"] = plan_figures(art)
        save(args.out, data, command)
        if args.expcheck:
            out, wall, cpu = _sh(["make", "-C", str(c_dir), "expcheck"])
            data["expcheck"] = {**exp_line(out), "wall_s": wall, "cpu_s": cpu}
            save(args.out, data, command)
        if args.frama_c:
            run_frama_c(c_dir, data, args.out, command)
    return 0


SUBJECTS = {  # --subject -> (preset, changes); init_params seed 0
    "control": ("control", {}),
    # d_in 2 as measured (claims/results/codegen_windowed.json); the preset's token now has 4 columns
    "windowed": ("control-hidden", {"d_in": 2}),
    "ssm": ("control", {"block": "ssm", "d_state": 16}),
}


def run_frama_c(c_dir: Path, data: dict, out_path: Path, command: str) -> None:
    """`make frama-c` in the generated directory: EVA's verdicts and output range into data["frama_c"],
    saved at once (the run takes minutes)."""
    out, wall, cpu = _sh(["make", "-C", str(c_dir), "frama-c"])
    data["frama_c"] = {**frama_c(out, wall, cpu), "output_range": eva_output_range(c_dir)}
    save(out_path, data, command)


def other_subject(args: argparse.Namespace, command: str) -> int:
    """The golden/refusal/sanitizer/cppcheck run (`tickformer codegen ART --out C --test`), the
    stack and symbols, what the plan derives, and optionally Frama-C EVA, for SUBJECTS[subject]."""
    from tickformer.export.writer import export_params
    from tickformer.model import init_params, preset

    name, changes = SUBJECTS[args.subject]
    cfg = preset(name).replace(**changes)
    data: dict = {
        "load_average_before": [round(x, 2) for x in os.getloadavg()],
        "preset": name,
        "changes": changes,
    }
    with tempfile.TemporaryDirectory() as tmp:
        art, c_dir = Path(tmp) / "art", Path(tmp) / "c"
        export_params(cfg, init_params(cfg, 0), art)
        out, wall, cpu = _sh([TICK, "codegen", str(art), "--out", str(c_dir), "--test"])
        data["codegen_test"] = {
            "golden": golden(out),
            "all_checks_passed": out.count("tf_test: all checks passed"),
            "cppcheck_no_findings": "cppcheck: no findings" in out,
            "slides": next((line for line in out.splitlines() if line.startswith("slides:")), None),
            "never_full": next((line for line in out.splitlines() if line.startswith("never full:")), None),
            "ssm_sampled": ssm_line(out) if "ssm elementary" in out else None,
            "wall_s": wall,
            "cpu_s": cpu,
        }
        data["stack"] = stack(c_dir)
        data["plan"] = plan_figures(art)
        save(args.out, data, command)
        if args.expcheck and args.subject == "ssm":
            out, wall, cpu = _sh(["make", "-C", str(c_dir), "ssmcheck"])
            data["ssmcheck"] = {**ssm_line(out), "wall_s": wall, "cpu_s": cpu}
            save(args.out, data, command)
        if args.frama_c:
            run_frama_c(c_dir, data, args.out, command)
    return 0


def ssm_line(out: str) -> dict:
    """tf_ssmcheck's line: values checked and the maximum relative error (u) per function."""
    line = _line(out, "ssm elementary")
    fields = {}
    for name in ("softplus", "tanh", "keep"):
        m = re.search(rf"{name} (\d+) values max ([\d.]+) u at \w+ = (\S+?)[;:]", line)
        if m is None:
            raise SystemExit(f"{name!r} not found in {line!r}")
        fields[name] = {
            "values": int(m.group(1)),
            "max_u": float(m.group(2)),
            "at": float.fromhex(m.group(3)),
        }
    return {
        "line": line,
        "stride": _num(r"\(stride (\d+)", line, int),
        "bound_u": _num(r"bound ([\d.]+) u", line),
        "broken": _num(r"contracts: (\d+) broken", line, int),
        **fields,
    }


if __name__ == "__main__":
    raise SystemExit(main())
