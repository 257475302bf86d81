"""Bare step.onnx latency of several commits, side by side in one run: the history table of
benchmarks/ANALYSIS.md section 1, reproducible.

    python experiments/compare_commits.py [--rounds 3] [--train] [COMMIT ...]

For each commit, `git archive` extracts its tree into a temporary directory; a child process
imports *that* tree's tickformer (a shim package puts its folders on `tickformer.__path__`, as
pyproject.toml's package-dir does), builds the `control` preset's step graph with seeded weights
(`init_params(config, 0)`, opset 17, batch 1) and times `InferenceSession.run` on it: one intra-op
thread, inputs read from the session itself (random normal floats, pos = max_len // 2), and
flush-to-zero set in the timing thread after the session exists (this tree's
runtime/denormals.py: every commit is timed the same way). It prints ORT's node count after
optimisation and the p50 of 3000 calls. Commits are visited round-robin, `--rounds` times, and the
median over rounds is reported (the machine's load drifts). About a second per commit and round.
`--train` instead times that tree's numpy training step (loss_and_grads + clip + Adam, one BLAS
thread): the control preset at B16xT64 and B4xT256 (median of 10 steps after 2 warm-up steps)
and the reverse task's own batches (median of 20 steps), about 2.5 s per commit and round; it
also prints each commit's speed-up over the first commit named, as the median over rounds of
the per-round ratio (each round times every commit back to back, so load drift cancels in the
ratio better than in the medians). Each tree's step runs as its trainer runs it (with
`train.keep_freed_memory()`, glibc keeping freed memory mapped, where the tree has it);
`--steady-malloc` gives every tree that setting, so the numbers compare the code alone.
`--train --json FILE` also writes the medians and the speed-ups under FILE's
modes["as_run" | "steady_malloc"] (the other mode's entry, if there, is kept: both runs of
docs/training.md go into claims/results/training_speed.json), with each commit resolved to its
hash, the date and the load average before and after.
`--outcome TASK --steps N` trains TASK (reverse or pendulum; seed `--seed`, the task's own
settings unless `--max-len/--batch/--warmup/--ema` override them) with each tree's own
`train_steps`, one BLAS thread, and prints the held-out metric (reverse: exact match; pendulum:
RMSE ratio to the best linear baseline), the mean loss of the last 50 steps, hashes of the loss
curve and of the weights, and the first step whose loss differs from the first commit's: whether
two trainers compute the same thing bit for bit, and what it does to the outcome.
`--session` times `Session.step` on the ORT backend instead (each tree exports the control preset
with its own exporter and loads it with its own runtime; p50/p99 of 3000 steps, reset at max_len,
flush-to-zero on) and prints each commit's per-round ratio to the first: the Python path around
the graph, what a re-cut of the package must not slow down.
`--final-iterate` evaluates the last iterate even where the recipe averages the weights. A
commit written `C:per-batch` runs C with its 2-D products over [..., n] rows replaced by numpy's
per-batch `x @ w` (the arithmetic before 92e54b2): a roundoff-only perturbation.
`C:mutant-rowsum` / `C:mutant-residual` (trees with the one forward, model/transformer.py's
records) break the trainer the way tests/model/test_train.py does: the softmax backward
without its rowsum term, the attention sub-layers without their residual gradient. About 80 s
per commit for 2000 reverse steps. Not part of `make bench`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
HISTORY = [
    "5ef73ef",
    "684fbb1",
    "f4d7e80",
    "51561fc",
    "HEAD",
]  # format 1; format 2; + bias folding; + K transposed; now

CHILD = r"""
import importlib.util, json, os, sys, tempfile, time
from pathlib import Path
root, denormals_py = sys.argv[1], sys.argv[2]
import numpy as np, onnx, onnxruntime as ort
from tickformer.export.graphs import build_step
from tickformer.model import init_params, preset
spec = importlib.util.spec_from_file_location("denormals", denormals_py)
denormals = importlib.util.module_from_spec(spec); spec.loader.exec_module(denormals)
config = preset("control")
model = build_step(init_params(config, 0), config, 1, 17)
opts = ort.SessionOptions(); opts.intra_op_num_threads = 1; opts.inter_op_num_threads = 1; opts.log_severity_level = 3
with tempfile.TemporaryDirectory() as tmp:
    opts.optimized_model_filepath = str(Path(tmp) / "opt.onnx")
    sess = ort.InferenceSession(model.SerializeToString(), sess_options=opts, providers=["CPUExecutionProvider"])
    nodes = len(onnx.load(opts.optimized_model_filepath).graph.node)
rng = np.random.default_rng(0)
feeds = {}
for arg in sess.get_inputs():
    if arg.name == "pos":
        feeds[arg.name] = np.array([config.max_len // 2], dtype=np.int64)
    else:
        feeds[arg.name] = rng.standard_normal(arg.shape).astype(np.float32)
assert denormals.set_flush_to_zero(True), "no flush-to-zero on this platform"
run = sess.run
for _ in range(300):
    run(None, feeds)
samples = np.empty(3000, dtype=np.int64)
clock = time.perf_counter_ns
for i in range(samples.size):
    t0 = clock(); run(None, feeds); samples[i] = clock() - t0
print(json.dumps({"nodes": nodes, "p50_us": float(np.median(samples)) / 1e3}))
"""

CHILD_SESSION = r"""
import importlib, importlib.util, json, sys, tempfile, time
from pathlib import Path
import numpy as np
spec = importlib.util.spec_from_file_location("denormals", sys.argv[2])
denormals = importlib.util.module_from_spec(spec); spec.loader.exec_module(denormals)
from tickformer import runtime
from tickformer.model import init_params, preset
writer = importlib.import_module(
    "tickformer.export.writer" if (Path(sys.argv[1]) / "export" / "writer.py").exists() else "tickformer.export.artifact"
)  # the exporter moved in the re-cut
config = preset("control")
with tempfile.TemporaryDirectory() as tmp:
    art = Path(tmp) / "art"
    writer.export_params(config, init_params(config, 0), art, lengths=[1, 2])
    session = runtime.load(art, backend="ort")
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-1, 1, size=session.input_shape).astype(np.float32) for _ in range(64)]
    assert denormals.set_flush_to_zero(True), "no flush-to-zero on this platform"
    step, reset, n = session.step, session.reset, session.max_len
    for i in range(2 * n):
        if i % n == 0:
            reset()
        step(xs[i % 64])
    samples = np.empty(3000, dtype=np.int64)
    clock = time.perf_counter_ns
    reset()
    for i in range(samples.size):
        if session.position == n:
            reset()
        x = xs[i % 64]
        t0 = clock(); step(x); samples[i] = clock() - t0
    print(json.dumps({"p50_us": float(np.median(samples)) / 1e3, "p99_us": float(np.percentile(samples, 99)) / 1e3}))
"""

CHILD_TRAIN = r"""
import importlib.util, json, sys
from threadpoolctl import threadpool_limits
spec = importlib.util.spec_from_file_location("train_step", sys.argv[3])
train_step = importlib.util.module_from_spec(spec); spec.loader.exec_module(train_step)
if sys.argv[4] == "1":  # --steady-malloc: every tree with train.keep_freed_memory()'s setting
    import ctypes
    mallopt = ctypes.CDLL("libc.so.6").mallopt
    assert mallopt(-3, 32 * 2**20) and mallopt(-1, 2**30)
with threadpool_limits(1):
    out = {f"B{b}xT{t}": train_step.train_step_ms(b, t) for b, t in train_step.SHAPES}
    out["reverse B64xT9"] = train_step.reverse_step_ms()
    print(json.dumps(out))
"""

CHILD_OUTCOME = r"""
import dataclasses, hashlib, json, sys
import numpy as np
from threadpoolctl import threadpool_limits
from tickformer.model import grad, layers
run = json.loads(sys.argv[4])
variant = run["variant"]
if variant == "per-batch":
    if hasattr(grad, "_matmul_rows"):  # 92e54b2 .. fd9aada
        grad._matmul_rows = lambda x, w: x @ w
    elif hasattr(layers, "matmul"):  # the one forward
        from tickformer.model import transformer
        layers.matmul = transformer.matmul = lambda x, w: x @ w
    else:
        raise SystemExit("this tree has no 2-D row product to replace (it already multiplies per batch)")
elif variant.startswith("mutant-"):
    from tickformer.model import transformer
    if not hasattr(transformer, "mha_backward"):
        raise SystemExit("mutants need the one forward's records (model/transformer.py)")
    real = transformer.mha_backward
    if variant == "mutant-rowsum":  # rowsum(dP * P) = dO . O, zeroed
        transformer.mha_backward = lambda dy, cache: real(dy, cache._replace(heads=np.zeros_like(cache.heads)))
    elif variant == "mutant-residual":  # cancels the residual dx += dsum that follows (dropout 0)
        def no_residual(dy, cache):
            dx, dkv, g = real(dy, cache)
            return dx - dy, dkv, g
        transformer.mha_backward = no_residual
    else:
        raise SystemExit(f"unknown variant {variant}")
elif variant:
    raise SystemExit(f"unknown variant {variant}")
from tickformer.model.config import preset
from tickformer.model.tasks import get_task
from tickformer.model.train import TrainSettings, train_steps
task = get_task(run["task"])
config = preset(task.preset)
if run["max_len"]:
    config = config.replace(max_len=run["max_len"])
settings = TrainSettings.for_task(task, steps=run["steps"], seed=run["seed"])
for field, key in (("batch_size", "batch"), ("warmup", "warmup"), ("ema_decay", "ema")):
    if run[key] is not None:
        settings = dataclasses.replace(settings, **{field: run[key]})
if run["final"]:
    settings = dataclasses.replace(settings, ema_decay=0.0)
with threadpool_limits(1):
    params, losses, data, _, cpu = train_steps(task, config, settings)
    held = task.hooks.evaluate(params, config, data)
digest = lambda b: hashlib.sha256(b).hexdigest()[:12]
print(json.dumps({"losses": losses, "metric": held["exact_match" if run["task"] == "reverse" else "ratio"],
                  "loss50": float(np.mean(losses[-50:])), "cpu_s": cpu, "settings": dataclasses.asdict(settings),
                  "loss_sha": digest(np.asarray(losses).tobytes()), "params_sha": digest(b"".join(params[k].tobytes() for k in sorted(params)))}))
"""

SHIM = """import os, sys
# An editable install of the current checkout adds a meta-path finder that resolves any
# tickformer.<pkg>.<module> the extracted tree lacks to the *current* code: drop it, so a
# missing module is an ImportError and never a silent mix of two trees.
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in getattr(f, "__module__", "")]
_root = {root!r}
__path__ = [os.path.join(_root, "core"), _root]  # tickformer -> core/, tickformer.<x> -> <x>/ (pyproject package-dir)
__file__ = os.path.join(_root, "core", "__init__.py")
exec(compile(open(__file__).read(), __file__, "exec"))
"""


def _utc() -> str:
    import datetime

    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def extract(commit: str, into: Path) -> str:
    """The commit's tree under `into`; returns its one-line subject."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", commit], capture_output=True, check=True).stdout
    with tarfile.open(fileobj=BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    shim = into / "_shim" / "tickformer"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text(SHIM.format(root=str(into)))
    return subprocess.run(
        ["git", "-C", str(REPO), "log", "-1", "--format=%h %s", commit],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def measure(
    tree: Path,
    train: bool = False,
    outcome: dict | None = None,
    steady_malloc: bool = False,
    session: bool = False,
) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree / "_shim"), OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    child = CHILD_OUTCOME if outcome else CHILD_TRAIN if train else CHILD_SESSION if session else CHILD
    extra = [json.dumps(outcome)] if outcome else ["1" if steady_malloc else "0"] if train else []
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            child,
            str(tree),
            str(REPO / "runtime" / "denormals.py"),
            str(REPO / "benchmarks" / "train_step.py"),
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tempfile.gettempdir(),
    )
    if out.returncode != 0:
        raise SystemExit(
            f"measuring {tree} failed: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}"
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("commits", nargs="*", default=HISTORY)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--train", action="store_true", help="time the numpy training step instead of the bare step graph"
    )
    parser.add_argument(
        "--session",
        action="store_true",
        help="time Session.step on the ORT backend (each tree's exporter and runtime) instead of the bare graph",
    )
    parser.add_argument(
        "--json", type=Path, help="--session / --train: also write the results to this JSON file"
    )
    parser.add_argument(
        "--steady-malloc",
        action="store_true",
        help="--train: give every tree keep_freed_memory()'s malloc setting (compares the code alone)",
    )
    parser.add_argument(
        "--outcome",
        choices=("reverse", "pendulum"),
        help="train this task with each tree's trainer and compare outcomes",
    )
    parser.add_argument("--steps", type=int, help="--outcome: training steps (default: the task's)")
    parser.add_argument("--seed", type=int, default=0, help="--outcome: seed")
    parser.add_argument(
        "--max-len",
        type=int,
        help="--outcome: the preset's max_len replaced (pendulum: the trajectory length)",
    )
    parser.add_argument("--batch", type=int, help="--outcome: batch size instead of the task's")
    parser.add_argument("--warmup", type=int, help="--outcome: warmup steps instead of the task's")
    parser.add_argument("--ema", type=float, help="--outcome: weight-averaging decay instead of the task's")
    parser.add_argument(
        "--final-iterate",
        action="store_true",
        help="--outcome: evaluate the last iterate, not averaged weights",
    )
    args = parser.parse_args()
    if args.outcome:
        run = {
            "task": args.outcome,
            "steps": args.steps,
            "seed": args.seed,
            "max_len": args.max_len,
            "batch": args.batch,
            "warmup": args.warmup,
            "ema": args.ema,
            "final": args.final_iterate,
        }
        compare_outcomes(args.commits, run)
        return
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for commit in args.commits:
            tree = Path(tmp) / commit.replace("/", "_")
            trees[commit] = (tree, extract(commit, tree))
        results: dict[str, list[dict]] = {c: [] for c in args.commits}
        load_before = os.getloadavg()[0]
        for _ in range(args.rounds):
            for commit in args.commits:
                results[commit].append(
                    measure(
                        trees[commit][0], args.train, steady_malloc=args.steady_malloc, session=args.session
                    )
                )

        def median(commit: str, key: str) -> float:
            return sorted(r[key] for r in results[commit])[len(results[commit]) // 2]

        if args.train:
            print(
                f"numpy training step (loss, gradients, clip, Adam), one thread, {args.rounds} rounds (median ms):"
            )
            for commit in args.commits:
                cells = "  ".join(f"{shape} {median(commit, shape):6.2f} ms" for shape in results[commit][0])
                print(f"  {cells}  {trees[commit][1][:90]}")
            base = args.commits[0]
            print(f"speed-up over {base} (median over rounds of the per-round ratio {base} ms / commit ms):")
            for commit in args.commits[1:]:
                ratios = {
                    shape: sorted(b[shape] / r[shape] for b, r in zip(results[base], results[commit]))
                    for shape in results[commit][0]
                }
                cells = "  ".join(
                    f"{shape} {v[len(v) // 2]:.3f}x [{v[0]:.3f}-{v[-1]:.3f}]" for shape, v in ratios.items()
                )
                print(f"  {cells}  {commit}")
            if args.json is not None:
                write_train_json(args, trees, results, load_before)
            return
        if args.session:
            base = args.commits[0]
            print(
                f"Session.step, ORT backend, control preset, {args.rounds} rounds (median of the p50 of 3000 steps):"
            )
            report = {"utc": _utc(), "load_avg": os.getloadavg()[0], "rounds": args.rounds, "commits": {}}
            for commit in args.commits:
                ratios = sorted(b["p50_us"] / r["p50_us"] for b, r in zip(results[base], results[commit]))
                print(
                    f"  p50 {median(commit, 'p50_us'):6.1f} us  p99 {median(commit, 'p99_us'):6.1f} us  "
                    f"{base} / this per round: {ratios[len(ratios) // 2]:.3f} [{ratios[0]:.3f}-{ratios[-1]:.3f}]  "
                    f"{trees[commit][1][:70]}"
                )
                report["commits"][commit] = {
                    "subject": trees[commit][1],
                    "p50_us": median(commit, "p50_us"),
                    "p99_us": median(commit, "p99_us"),
                    "ratio_to_first": ratios[len(ratios) // 2],
                    "ratio_range": [ratios[0], ratios[-1]],
                }
            if args.json is not None:
                args.json.write_text(json.dumps(report, indent=2) + "\n")
            return
        print(
            f"bare step.onnx, control preset, pos = max_len // 2, {args.rounds} rounds (median p50 of 3000 calls):"
        )
        for commit in args.commits:
            print(
                f"  {results[commit][0]['nodes']:4d} ORT nodes  {median(commit, 'p50_us'):6.1f} us  "
                f"{trees[commit][1][:100]}"
            )


def _resolved(commit: str) -> str:
    return subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", commit], capture_output=True, text=True, check=True
    ).stdout.strip()


def write_train_json(
    args: argparse.Namespace, trees: dict, results: dict[str, list[dict]], load_before: float
) -> None:
    """--train --json: this run under modes[as_run | steady_malloc] of the file (others kept)."""
    base = args.commits[0]
    mode = "steady_malloc" if args.steady_malloc else "as_run"
    entry: dict = {
        "utc": _utc(),
        "command": "python experiments/compare_commits.py --train"
        + (" --steady-malloc" if args.steady_malloc else "")
        + f" --rounds {args.rounds} {' '.join(args.commits)}",
        "rounds": args.rounds,
        "load_avg_before": round(load_before, 2),
        "load_avg_after": round(os.getloadavg()[0], 2),
        "base": base,
        "commits": {},
    }
    for commit in args.commits:
        rows = results[commit]
        med = {shape: sorted(r[shape] for r in rows)[len(rows) // 2] for shape in rows[0]}
        speedup = {}
        for shape in rows[0]:
            v = sorted(b[shape] / r[shape] for b, r in zip(results[base], rows))
            speedup[shape] = {"median": v[len(v) // 2], "min": v[0], "max": v[-1]}
        entry["commits"][commit] = {
            "resolved": _resolved(commit),
            "subject": trees[commit][1],
            "median_ms": med,
            "speedup_over_base": speedup,
        }
    data = json.loads(args.json.read_text()) if args.json.exists() else {"modes": {}}
    data["modes"][mode] = entry
    data["utc"] = entry["utc"]
    data["what"] = (
        "numpy training step (loss, gradients, clip, Adam), one BLAS thread, each commit's own code side by "
        "side; speed-up = median over rounds of the per-round ratio base ms / commit ms"
    )
    tmp = args.json.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    tmp.replace(args.json)


def compare_outcomes(specs: list[str], run: dict) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        subjects: dict[str, str] = {}
        rows = []
        for spec in specs:
            commit, _, variant = spec.partition(":")
            tree = Path(tmp) / commit.replace("/", "_")
            if commit not in subjects:
                subjects[commit] = extract(commit, tree)
            rows.append((spec, subjects[commit], measure(tree, outcome=dict(run, variant=variant))))
    base = rows[0][2]["losses"]
    metric = "exact match" if run["task"] == "reverse" else "RMSE ratio"
    what = "last iterate" if run["final"] else "each tree's recipe"
    print(
        f"{run['task']}, seed {run['seed']}, one thread, evaluated: {what}; settings of the first: "
        f"{rows[0][2]['settings']}"
    )
    for spec, subject, r in rows:
        differ = next((i + 1 for i, (a, b) in enumerate(zip(base, r["losses"])) if a != b), None)
        same = "losses = first's" if differ is None else f"losses differ from step {differ}"
        print(
            f"  {metric} {r['metric']:.3f}  loss(last 50) {r['loss50']:.4f}  losses {r['loss_sha']}  "
            f"weights {r['params_sha']}  "
            f"{same}  ema {r['settings']['ema_decay']}  CPU {r['cpu_s']:.0f} s  {spec}: {subject[:50]}"
        )


if __name__ == "__main__":
    main()
