"""Every user error of every `tickformer` subcommand: one line on stderr naming the problem and
the fix, a non-zero exit, no traceback; `--debug` shows the traceback.

The cases run in a child process (not in pytest's): one driver process calls the dispatcher
`tickformer.cli.main(argv)` for each case with fresh stdout/stderr buffers and reports the exit
code and both streams, an uncaught exception formatted as the interpreter would print it (so a
traceback is seen exactly as a user would see it). One process pays the ~1 s import once
instead of once per case. A few cases also run through the real console script
(`.venv/bin/tickformer`, else `python -m tickformer`) to check the entry point itself.
The subcommand list is read from `tickformer --help`, and a test fails if a subcommand has no
error case here, so new subcommands get covered. Argument-syntax errors (argparse: missing
option, bad choice) exit 2 with argparse's usage line plus one error line: checked separately.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from numpy.lib import format as np_format

from tickformer.export.writer import export_params
from tickformer.model import init_params, preset
from tickformer.model.checkpoint import save_checkpoint

SCRIPT = Path(sys.executable).with_name("tickformer")
BASE = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "tickformer"]
FIX_WORDS = (
    "choose",
    "use ",
    "pass ",
    "re-export",
    "retrain",
    "restore",
    "install",
    "must",
    "run ",
    "rebuild",
    "give",
    "save it",
    "convert",
    "replace",
    "clip",
    "swap",
    "declare",
    "pick",
    "train ",
    "export ",
    "re-save",
    "call ",
    "set ",
    "remove",
    "refusing",
    "needs",
    "e.g.",
    "one of",
    "should",
    "write one",
)
TIMEOUT = 120


def _files(root: Path) -> dict[str, str]:
    """Placeholders -> paths of the fixtures the cases refer to (built once)."""
    cfg = preset("tiny")
    params = init_params(cfg, 0)
    ckpt = root / "ckpt"
    save_checkpoint(ckpt, cfg, params, {"task": "pendulum", "input_domain": [-10.0, 10.0]})
    art = root / "art"
    export_params(cfg, params, art, lengths=[1, 16])
    windowed = cfg.replace(window=8)
    save_checkpoint(root / "window_ckpt", windowed, init_params(windowed, 0), {"task": "pendulum"})
    bad_ckpt = root / "bad_ckpt"
    shutil.copytree(ckpt, bad_ckpt)
    data = bytearray((bad_ckpt / "weights.npz").read_bytes())
    data[100] ^= 1
    (bad_ckpt / "weights.npz").write_bytes(bytes(data))
    bad_art = root / "bad_art"
    shutil.copytree(art, bad_art)
    data = bytearray((bad_art / "step.onnx").read_bytes())
    data[-1] ^= 1
    (bad_art / "step.onnx").write_bytes(bytes(data))
    future = root / "future_art"
    shutil.copytree(art, future)
    manifest = json.loads((future / "manifest.json").read_text())
    manifest["version"] = 99
    (future / "manifest.json").write_text(json.dumps(manifest))
    keep = root / "keep"
    keep.mkdir()
    (keep / "notes.txt").write_text("precious")
    rng = np.random.default_rng(0)
    np.save(root / "ok.npy", rng.uniform(-1, 1, size=(4, 3)).astype(np.float32))
    np.save(root / "wide.npy", np.zeros((4, 5), np.float32))
    nan = np.zeros((4, 3), np.float32)
    nan[2, 1] = np.nan
    np.save(root / "nan.npy", nan)
    np.save(root / "out_of_domain.npy", np.full((4, 3), 50.0, np.float32))
    np.save(root / "too_long.npy", np.zeros((17, 3), np.float32))
    np.save(root / "ints.npy", np.zeros((4, 3), np.int64))
    obj = np.empty(2, dtype=object)
    obj[0], obj[1] = {"a": 1}, [2]
    np.save(root / "pickled.npy", obj, allow_pickle=True)
    (root / "garbage.npy").write_bytes(b"this is not a numpy file")
    header = io.BytesIO()  # 3.6 TiB declared in a file of a few dozen bytes: np.load allocates first
    np_format.write_array_header_1_0(
        header, {"descr": "<f4", "fortran_order": False, "shape": (10**6, 10**6)}
    )
    (root / "huge_header.npy").write_bytes(header.getvalue() + bytes(16))
    (root / "bad_header.npy").write_bytes(b"\x93NUMPY\x01\x00\x10\x00{'descr': 3 ]]]   \n" + bytes(16))
    (root / "garbage.onnx").write_bytes(b"\x08\x07garbage")
    (root / "afile").write_text("x")
    (root / "foreign.bin").write_bytes(b"\x89PNG\r\n\x1a\n not numpy at all")
    _attack_fixtures(root, art, ckpt)
    _foreign_fixtures(root)
    return {
        k: str(v)
        for k, v in {
            "ONNX": root / "causal.onnx",
            "BAD_SPEC": root / "bad_spec.toml",
            "CKPT": ckpt,
            "WINDOW_CKPT": root / "window_ckpt",
            "ART": art,
            "BAD_CKPT": bad_ckpt,
            "BAD_ART": bad_art,
            "FUTURE_ART": future,
            "KEEP": keep,
            "TMP": root,
            "FILE": root / "afile",
            "FIFO_MANIFEST_ART": root / "fifo_manifest_art",
            "DEEP_ART": root / "deep_art",
            "EXTRA_FIFO_ART": root / "extra_fifo_art",
            "HUGE_DOMAIN_ART": root / "huge_domain_art",
            "LINKED_CKPT": root / "linked_ckpt",
            "SIGNED_ART": root / "signed_art",
            "TAMPERED_SIGNED_ART": root / "tampered_signed_art",
            "OTHER_SIGNED_ART": root / "other_signed_art",
            "KEY": root / "key",
            "PUB": root / "key.pub",
            "LONG": "x" * 300,
        }.items()
    }


def _reseal(path: Path, mutate) -> None:
    """Rewrite a manifest with `mutate` applied and its self-hash recomputed (what anyone who can
    write the directory can do: the hash is no signature)."""
    from tickformer import sealed

    manifest = json.loads(path.read_text())
    mutate(manifest)
    path.write_text(json.dumps(sealed.seal(manifest)))


def _attack_fixtures(root: Path, art: Path, ckpt: Path) -> None:
    """Artifacts and checkpoints an attacker with write access to the directory could leave."""
    from tickformer import signing
    from tickformer.artifact.signer import sign_artifact

    fifo = root / "fifo_manifest_art"
    shutil.copytree(art, fifo)
    (fifo / "manifest.json").unlink()
    os.mkfifo(fifo / "manifest.json")  # reading it without O_NONBLOCK would hang
    deep = root / "deep_art"
    shutil.copytree(art, deep)
    (deep / "manifest.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    extra = root / "extra_fifo_art"
    shutil.copytree(art, extra)
    os.mkfifo(extra / "extra.onnx")
    huge = root / "huge_domain_art"
    shutil.copytree(art, huge)
    _reseal(huge / "manifest.json", lambda m: m.update(input_domain=[-1e308, 1e308]))
    linked = root / "linked_ckpt"
    shutil.copytree(ckpt, linked)
    os.mkfifo(root / "fifo")
    (linked / "config.json").unlink()
    os.symlink(root / "fifo", linked / "config.json")
    signing.generate_key(root / "key")
    signing.generate_key(root / "other")
    for name, key in (("signed_art", "key"), ("tampered_signed_art", "key"), ("other_signed_art", "other")):
        shutil.copytree(art, root / name)
        sign_artifact(root / name, root / key)
    _reseal(
        root / "tampered_signed_art" / "manifest.json",
        lambda m: m.update(output_bound=m["output_bound"] * 1e3),
    )


# (subcommand, argv after the subcommand, words the one-line message must contain)
CASES = [
    ("info", ["--preset", "nope"], "unknown preset 'nope'"),
    ("info", ["{TMP}/nowhere"], "does not exist"),
    ("info", ["{BAD_CKPT}"], "SHA-256"),
    ("info", ["{ART}"], "checkpoint.json"),
    ("train", ["--task", "nope", "--out", "{TMP}/t1"], "unknown task 'nope'"),
    ("train", ["--task", "pendulum", "--out", "{TMP}/t2", "--steps", "0", "--quiet"], "--steps 0"),
    ("train", ["--task", "pendulum", "--out", "{KEEP}", "--steps", "1", "--quiet"], "refusing to overwrite"),
    ("train", ["--task", "pendulum", "--out", "{TMP}/t3", "--preset", "nope", "--quiet"], "nope"),
    ("train", ["--task", "pendulum", "--out", "{TMP}/t4", "--window", "0", "--quiet"], "--window 0"),
    ("train", ["--task", "pendulum", "--out", "{TMP}/t5", "--window", "-3", "--quiet"], "--window -3"),
    ("train", ["--task", "pendulum", "--out", "{TMP}/t6", "--window", "9999", "--quiet"], "--window 9999"),
    ("train", ["--task", "pendulum", "--out", "{TMP}/t7", "--window", "2.5", "--quiet"], "not an integer"),
    ("train", ["--task", "reverse", "--out", "{TMP}/t8", "--window", "4", "--quiet"], "decoder-only"),
    ("export", ["{TMP}/nowhere", "--out", "{TMP}/e1"], "does not exist"),
    ("export", ["{BAD_CKPT}", "--out", "{TMP}/e2"], "SHA-256"),
    ("export", ["{CKPT}", "--out", "{TMP}/e3", "--max-len", "0"], "--max-len 0"),
    ("export", ["{CKPT}", "--out", "{TMP}/e4", "--max-len", "999"], "--max-len 999"),
    ("export", ["{CKPT}", "--out", "{TMP}/e5", "--batch", "0"], "--batch 0"),
    ("export", ["{CKPT}", "--out", "{TMP}/e6", "--opset", "5"], "opset"),
    ("export", ["{CKPT}", "--out", "{TMP}/e7", "--domain=5:-5"], "empty"),
    ("export", ["{CKPT}", "--out", "{TMP}/e8", "--domain", "abc"], "LO:HI"),
    ("export", ["{CKPT}", "--out", "{TMP}/e9", "--domain=-inf:1"], "finite"),
    ("export", ["{CKPT}", "--out", "{KEEP}"], "refusing to overwrite"),
    ("export", ["{WINDOW_CKPT}", "--out", "{TMP}/e12", "--max-len", "4"], "raise --max-len to 8..16"),
    ("inspect", ["{TMP}/nowhere"], "not a directory"),
    ("inspect", ["{BAD_ART}"], "step.onnx: SHA-256"),
    ("inspect", ["{FUTURE_ART}"], "version 99"),
    ("inspect", ["{CKPT}"], "manifest.json"),
    ("run", ["{ART}", "--input", "{TMP}/missing.npy"], "missing.npy"),
    ("run", ["{ART}", "--input", "{TMP}/garbage.npy"], "garbage.npy"),
    ("run", ["{ART}", "--input", "{TMP}/pickled.npy"], "pickled.npy"),
    ("run", ["{ART}", "--input", "{TMP}/huge_header.npy"], "declares shape (1000000, 1000000)"),
    ("run", ["{ART}", "--input", "{TMP}/bad_header.npy"], "cannot read the .npy header"),
    ("run", ["{ART}", "--input", "{TMP}/wide.npy"], "shape"),
    ("run", ["{ART}", "--input", "{TMP}/nan.npy"], "non-finite"),
    ("run", ["{ART}", "--input", "{TMP}/out_of_domain.npy"], "outside the declared domain"),
    ("run", ["{ART}", "--input", "{TMP}/too_long.npy"], "max_len 16; re-export with --max-len 17"),
    ("run", ["{ART}", "--input", "{TMP}/ints.npy"], "floating point"),
    ("run", ["{ART}", "--input", "{TMP}/ok.npy", "--threads", "0"], "threads"),
    ("run", ["{ART}", "--input", "{TMP}/ok.npy", "--repeat", "0"], "--repeat 0"),
    ("run", ["{ART}", "--input", "{TMP}/ok.npy", "--backend", "tensorrt"], "tensorrt"),
    ("run", ["{ART}", "--input", "{TMP}/ok.npy", "--backend", "numpy", "--threads", "2"], "ort"),
    ("run", ["{BAD_ART}", "--input", "{TMP}/ok.npy"], "SHA-256"),
    ("run", ["{ART}", "--input", "{TMP}/ok.npy", "--output", "{TMP}/no/such/dir/out.npy"], "out.npy"),
    ("build", ["{ART}", "--backend", "tensorrt"], "TensorRT"),
    ("build", ["{TMP}/nowhere", "--backend", "tensorrt"], "nowhere"),
    ("build", ["{ART}", "--backend", "tensorrt", "--workspace", "1"], "--workspace 1"),
    ("check", ["{TMP}/nowhere", "--target", "trt-10.3"], "nowhere"),
    ("prove", ["--contract", "nope"], "unknown contract"),
    ("prove", ["--total-timeout", "0"], "timeout"),
    ("verify", ["{TMP}/nowhere"], "nowhere"),
    ("verify", ["{ART}", "--examples", "0"], "--examples 0"),
    ("verify", ["{ART}", "--backend", "nope"], "nope"),
    ("verify", ["{BAD_ART}"], "SHA-256"),
    ("verify", ["{TMP}/garbage.onnx"], "garbage.onnx"),
    ("certify", ["{ART}", "--budget-us", "-5", "--out", "{TMP}/c1"], "--budget-us"),
    ("certify", ["{TMP}/nowhere", "--budget-us", "100", "--out", "{TMP}/c2"], "nowhere"),
    ("certify", ["{ART}", "--budget-us", "100", "--samples", "0", "--out", "{TMP}/c3"], "samples"),
    ("certify", ["{ART}", "--budget-us", "100", "--backend", "nope", "--out", "{TMP}/c4"], "nope"),
    ("certify", ["{BAD_ART}", "--budget-us", "100", "--out", "{TMP}/c5"], "SHA-256"),
    ("demo", ["--out", "{TMP}/d1", "--ticks", "0"], "--ticks 0"),
    ("demo", ["--out", "{TMP}/d2", "--candidates", "1"], "--candidates 1"),
    ("demo", ["--out", "{FILE}/sub"], "afile"),
    # issue 20: attacks on the files a command loads, and the signing commands
    ("inspect", ["{TMP}/{LONG}"], "file name too long"),
    ("export", ["{CKPT}", "--out", "{TMP}/{LONG}"], "too long"),
    ("run", ["{ART}", "--input", "{TMP}/ok.npy", "--output", "{TMP}/{LONG}.npy"], "too long"),
    ("inspect", ["{FIFO_MANIFEST_ART}"], "FIFO"),
    ("verify", ["{FIFO_MANIFEST_ART}"], "FIFO"),
    ("verify", ["{DEEP_ART}"], "nested deeper"),
    ("check", ["{EXTRA_FIFO_ART}", "--target", "trt-10.3"], "extra.onnx"),
    ("run", ["{ART}", "--input", "{TMP}/foreign.bin"], "not a .npy file"),
    ("run", ["{ART}", "--input", "{TMP}/ok.npy", "--output", "{ART}/out.npy"], "inside the artifact"),
    ("certify", ["{HUGE_DOMAIN_ART}", "--budget-us", "100", "--out", "{TMP}/c6"], "float32"),
    ("export", ["{CKPT}", "--out", "{TMP}/e10", "--domain=-1e308:1e308"], "float32"),
    ("export", ["{LINKED_CKPT}", "--out", "{TMP}/e11"], "symbolic link"),
    ("keygen", ["--out", "{KEY}"], "refusing to overwrite"),
    ("keygen", ["--out", "{TMP}/no/such/dir/k"], "no such file"),
    ("sign", ["{SIGNED_ART}", "--key", "{PUB}"], "not an unencrypted PEM private key"),
    ("sign", ["{BAD_ART}", "--key", "{KEY}"], "SHA-256"),
    ("inspect", ["{ART}", "--trust", "{PUB}"], "not signed"),
    ("inspect", ["{ART}", "--trust", "{FILE}"], "PEM"),
    (
        "run",
        ["{TAMPERED_SIGNED_ART}", "--input", "{TMP}/ok.npy", "--trust", "{PUB}"],
        "signature does not match",
    ),
    ("verify", ["{OTHER_SIGNED_ART}", "--trust", "{PUB}"], "not by the trusted key"),
    ("check", ["{ART}", "--target", "trt-10.3", "--trust", "{PUB}"], "not signed"),
    ("certify", ["{ART}", "--budget-us", "100", "--out", "{TMP}/c7", "--trust", "{PUB}"], "not signed"),
    ("build", ["{ART}", "--backend", "tensorrt", "--trust", "{PUB}"], "not signed"),
    ("codegen", ["{TMP}/nowhere", "--out", "{TMP}/g1"], "nowhere"),
    ("codegen", ["{ART}", "--out", "{KEEP}"], "not a tickformer codegen output"),
    ("codegen", ["{BAD_ART}", "--out", "{TMP}/g2"], "SHA-256"),
    ("codegen", ["{ART}", "--out", "{TMP}/g3", "--trust", "{PUB}"], "not signed"),
    ("codegen", ["{OTHER_SIGNED_ART}", "--out", "{TMP}/g4", "--trust", "{PUB}"], "not by the trusted key"),
    ("codegen", ["{ART}", "--out", "{TMP}/g5", "--weights", "fp8"], "unknown weight format 'fp8'"),
]


def _foreign_fixtures(root: Path) -> None:
    """A bare ONNX model (x [B, T, 3] -> y) and a spec file with an unknown key (issue 17)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "T", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "T", 3])
    axis = numpy_helper.from_array(np.array(1, np.int64), "axis")
    graph = helper.make_graph([helper.make_node("CumSum", ["x", "axis"], ["y"])], "g", [x], [y], [axis])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), root / "causal.onnx")
    (root / "bad_spec.toml").write_text("version = 1\n[inputs.x]\nrange = [0, 1]\n")


CASES += [  # issue 17: bare ONNX models (verify exits 2 on a user error: 1 is a violated property)
    ("verify", ["{ONNX}"], "--domain"),
    ("verify", ["{ONNX}", "--domain", "-1:1", "--vocab", "9"], "--vocab"),
    ("verify", ["{ONNX}", "--spec", "{BAD_SPEC}"], "unknown key 'range'"),
    ("verify", ["{ONNX}", "--spec", "{FILE}"], ".toml or .json"),
    ("verify", ["{ART}", "--spec", "{BAD_SPEC}"], "bare ONNX"),
    ("verify", ["{ONNX}", "--domain", "-1:1", "--weights", "fp16"], "is not an artifact directory"),
    ("verify", ["{TMP}/nowhere", "--weights", "fp16"], "nowhere is not an artifact directory"),
    ("verify", ["{ONNX}", "--domain", "-1:1", "--output-bound", "-1"], "--output-bound"),
    ("inspect", ["{ONNX}", "--spec", "{BAD_SPEC}"], "unknown key"),
    (
        "certify",
        ["{ONNX}", "--domain=-1:1", "--mode", "step", "--budget-us", "100", "--out", "{TMP}/c8"],
        "--step",
    ),
    ("certify", ["{ART}", "--step", "{ONNX}", "--budget-us", "100", "--out", "{TMP}/c9"], "bare ONNX"),
    ("check", ["{ONNX}", "--target", "trt-10.3", "--spec", "{BAD_SPEC}"], "unknown key"),
]

# The exit code of a user error: 1, but `verify`'s is 2 (its 1 means a property was violated), and
# so is `certify`'s on a bare ONNX model (issue 37: every failure on a user's model is 2; 1 is FAIL).
ERROR_EXIT = {"verify": 2, "prove": 2}


def _error_exit(sub, argv):
    return 2 if sub == "certify" and argv and argv[0] == "{ONNX}" else ERROR_EXIT.get(sub, 1)


# Cases that expose a bug in a file this test does not own: strict xfail, the reason is the fix.
KNOWN_BUGS: dict[str, str] = {}

# argparse syntax errors: exit 2, usage + one "error:" line, no traceback
CASES += [  # issue 35: train without a task or data; tickformer log
    ("train", ["--out", "{TMP}/t9", "--quiet"], "give --task NAME"),
    ("log", ["nope", "--out", "{TMP}/l1.csv"], "unknown plant 'nope'"),
    ("log", ["tanks", "--out", "{TMP}/l2.txt"], "give a .csv or .parquet file name"),
    ("log", ["tanks", "--out", "{TMP}/l3.csv", "--runs", "0"], "--runs"),
]
CASES += [  # issue 36: tickformer plant (the cart-pole chain); log's --policy and --extend
    ("plant", ["nope", "--out", "{TMP}/p1"], "unknown plant 'nope'"),
    ("plant", ["cartpole", "--out", "{TMP}/p2", "--draws", "0"], "--draws"),
    ("log", ["cartpole", "--out", "{TMP}/l4.csv", "--policy", "{TMP}/nowhere"], "nowhere"),
    ("log", ["cartpole", "--out", "{TMP}/l5.csv", "--policy", "{ART}"], "names no signals"),
    ("log", ["cartpole", "--out", "{TMP}/l6.csv", "--extend", "{TMP}/none.csv"], "no such file"),
    ("log", ["tanks", "--out", "{TMP}/l7.csv", "--policy", "nominal"], "for the cartpole plant"),
]
CASES += [  # issue 36: any gymnasium environment (gym:ID) for log and plant
    ("log", ["gym:", "--out", "{TMP}/g1.csv"], "names no environment"),
    ("log", ["gym:NoSuchEnv-v0", "--out", "{TMP}/g2.csv"], "gymnasium cannot make it"),
    ("log", ["gym:CartPole-v1", "--out", "{TMP}/g3.csv"], "not a continuous Box"),
    (
        "log",
        ["gym:Pendulum-v1", "--out", "{TMP}/g4.csv", "--extend", "{TMP}/none.csv"],
        "for the cartpole plant",
    ),
    ("log", ["gym:Pendulum-v1", "--out", "{TMP}/g5.csv", "--rows", "0"], "--rows"),
    ("plant", ["gym:CartPole-v1", "--out", "{TMP}/g6"], "not a continuous Box"),
    ("plant", ["gym:Reacher-v5", "--out", "{TMP}/g7"], "2 dimensions"),
    ("plant", ["gym:Pendulum-v1", "--out", "{TMP}/g8", "--target", "1,0"], "--target"),
    ("plant", ["gym:Pendulum-v1", "--out", "{TMP}/g9", "--weights", "a,b,c"], "--weights"),
    ("plant", ["gym:Pendulum-v1", "--out", "{TMP}/g10", "--rounds", "2"], "--rounds"),
    ("plant", ["gym:Pendulum-v1", "--out", "{TMP}/g11", "--ticks", "0"], "--ticks"),
    ("plant", ["cartpole", "--out", "{TMP}/g12", "--target", "1"], "for a gym:ID plant"),
]
CASES += [  # issue 39: tickformer serve
    ("serve", ["{TMP}/nowhere", "--repo", "{TMP}/s1"], "nowhere"),
    ("serve", ["{BAD_ART}", "--repo", "{TMP}/s2"], "SHA-256"),
    ("serve", ["{ART}", "--repo", "{TMP}/s3", "--slots", "0"], "--slots"),
    ("serve", ["{ART}", "--repo", "{TMP}/s4", "--run", "--server-env", "{TMP}/noenv"], ".venv-serve"),
    (
        "serve",
        ["{ART}", "--repo", "{TMP}/s5", "--form", "onnxruntime", "--run"],
        "NVIDIA's tritonserver container",
    ),
    ("serve", ["{ART}", "--repo", "{TMP}/s6", "--trust", "{PUB}"], "not signed"),
]

SYNTAX_CASES = [
    ["nope"],
    ["export", "{CKPT}"],
    ["run", "{ART}", "--input", "x.npy", "--repeat", "many"],
    ["certify", "{ART}", "--out", "x"],
    ["check", "{ART}", "--target", "trt-9"],
    ["train", "--task", "pendulum", "--out", "x", "--steps", "many"],
]


def _fill(argv, files):
    return [re.sub(r"\{(\w+)\}", lambda m: str(files[m.group(1)]), a) for a in argv]


def _run(argv, env=None):
    """The real console script in a subprocess."""
    proc = subprocess.run(BASE + argv, capture_output=True, text=True, timeout=TIMEOUT, env=env)
    return proc.returncode, proc.stdout, proc.stderr


DRIVER = r"""
import contextlib, io, json, sys, traceback
from tickformer.cli import main
jobs = json.loads(sys.stdin.read())
results = {}
for key, argv in jobs.items():
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # argparse
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            traceback.print_exc()  # what the interpreter would print for an uncaught exception
            rc = 1
    results[key] = [rc, out.getvalue(), err.getvalue()]
json.dump(results, sys.__stdout__)
"""


def _run_in_driver(jobs, env):
    """All jobs through tickformer.cli.main in one child process: key -> (rc, stdout, stderr)."""
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {key: tuple(value) for key, value in json.loads(proc.stdout).items()}


def _case_id(case):
    sub, argv, _ = case
    return f"{sub}:" + " ".join(argv).replace("{TMP}/", "").replace("{", "").replace("}", "")[:60]


ENTRY_POINT_CASES = [0, 18, 22, 36]  # indices into CASES also run through the real console script


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """Every case run once: id -> (rc, stdout, stderr); 'script:' ids ran the console script."""
    files = _files(tmp_path_factory.mktemp("cli-errors"))
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    jobs = {_case_id(c): [c[0], *_fill(c[1], files)] for c in CASES}
    jobs.update(
        {"debug:" + _case_id(c): ["--debug", c[0], *_fill(c[1], files)] for c in CASES[:4] + CASES[18:20]}
    )
    jobs.update({"syntax:" + " ".join(a): _fill(a, files) for a in SYNTAX_CASES})
    out = _run_in_driver(jobs, env)
    script_jobs = {
        "script:" + _case_id(CASES[i]): [CASES[i][0], *_fill(CASES[i][1], files)] for i in ENTRY_POINT_CASES
    }
    script_jobs["script:debug"] = ["--debug", *jobs[_case_id(CASES[0])]]
    script_jobs["script:syntax"] = _fill(SYNTAX_CASES[1], files)
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(_run, argv, env) for key, argv in script_jobs.items()}
        out.update({key: f.result() for key, f in futures.items()})
    out["__files__"] = files  # type: ignore[assignment]
    return out


def _params():
    out = []
    for case in CASES:
        key = _case_id(case)
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BUGS[key])] if key in KNOWN_BUGS else []
        out.append(pytest.param(case, id=key, marks=marks))
    return out


def _record(kind, outcome):
    try:  # counted in docs/reliability_report.md when the reliability tests run in the same session
        import _relutil
    except ImportError:
        return
    _relutil.OUTCOMES.describe(
        kind,
        "each user error of each subcommand, through tickformer.cli.main in a child process: one stderr "
        "line, exit 1, no traceback",
    )
    _relutil.OUTCOMES.record(kind, outcome)


@pytest.mark.parametrize("case", _params())
def test_user_error_is_one_line_naming_problem_and_fix(results, case):
    sub, argv, words = case
    rc, stdout, stderr = results[_case_id(case)]
    lines = [line for line in stderr.splitlines() if line.strip()]
    want = _error_exit(sub, argv)
    ok = rc == want and len(lines) == 1 and "Traceback" not in stderr + stdout
    _record(
        "cli: user error of a subcommand (child process)",
        "one line, exit 1 (verify: 2)" if ok else f"exit {rc}, {len(lines)} stderr lines",
    )
    assert "Traceback" not in stderr + stdout, stderr[-3000:]
    assert rc == want, f"exit {rc}; stderr: {stderr[-1500:]}"
    assert len(lines) == 1, f"{len(lines)} stderr lines: {stderr[-1500:]}"
    line = lines[0]
    assert line.startswith(f"tickformer {sub}: error: "), line
    assert words.lower() in line.lower(), f"{words!r} not in {line!r}"
    assert any(w in line for w in FIX_WORDS), f"the message names no fix: {line!r}"


@pytest.mark.parametrize("index", ENTRY_POINT_CASES)
def test_console_script_prints_the_same_one_line_error(results, index):
    """The installed entry point behaves like the dispatcher: same exit code, same one line."""
    key = _case_id(CASES[index])
    assert results["script:" + key][0] == results[key][0] == 1
    assert results["script:" + key][2] == results[key][2]
    rc, _, stderr = results["script:debug"]
    assert rc != 0 and "Traceback (most recent call last)" in stderr
    rc, _, stderr = results["script:syntax"]
    assert rc == 2 and "Traceback" not in stderr and stderr.startswith("usage: tickformer")


def test_check_reports_an_unparseable_onnx_as_a_finding(tmp_path):
    """`check` is a linter: an unreadable file is a finding on stdout with exit 1, no traceback."""
    (tmp_path / "garbage.onnx").write_bytes(b"\x08\x07garbage")
    rc, out, err = _run(["check", str(tmp_path / "garbage.onnx"), "--target", "trt-10.3"])
    assert rc == 1 and "Traceback" not in out + err
    assert "garbage.onnx" in out and "onnx-invalid" in out


def test_every_subcommand_has_error_cases():
    rc, out, _ = _run(["--help"])
    assert rc == 0
    listed = set(re.findall(r"^    (\w+)\s{2,}", out, flags=re.M))
    assert listed, out
    covered = {c[0] for c in CASES}
    assert listed <= covered, f"subcommands without error cases: {sorted(listed - covered)}"


def test_debug_shows_the_traceback(results):
    keys = [k for k in results if k.startswith("debug:")]
    assert len(keys) == 6
    for key in keys:
        rc, _, stderr = results[key]
        assert rc != 0 and "Traceback (most recent call last)" in stderr and "Error" in stderr, (
            key,
            stderr[-800:],
        )


@pytest.mark.parametrize("argv", SYNTAX_CASES, ids=[" ".join(a) for a in SYNTAX_CASES])
def test_argument_syntax_errors_exit_2_with_one_error_line(results, argv):
    rc, stdout, stderr = results["syntax:" + " ".join(argv)]
    assert rc == 2 and "Traceback" not in stderr + stdout
    errors = [line for line in stderr.splitlines() if ": error: " in line]
    assert len(errors) == 1, stderr
    assert stderr.lstrip().startswith("usage: tickformer")


def test_failed_commands_leave_the_directories_they_refused_intact(results):
    files = results["__files__"]
    keep = Path(files["KEEP"])
    assert (
        sorted(p.name for p in keep.iterdir()) == ["notes.txt"]
        and (keep / "notes.txt").read_text() == "precious"
    )
    root = Path(files["TMP"])
    made = sorted(p.name for p in root.iterdir() if p.name[:1] in "etcd" and p.name[1:].isdigit())
    assert made == [], f"failed commands left outputs behind: {made}"
