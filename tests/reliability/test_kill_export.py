"""Writers killed at random moments (SIGKILL, no cleanup) leave the previous valid artifact /
checkpoint, the new one, or none -- never a half-written one that passes the hash checks.

A child process overwrites the same target in a loop, alternating two different contents A and
B (A is in place before the child starts); the parent kills it after a random delay (seeded).
Then the target, and every hidden temp directory left beside it, must either be refused with our
error or load as exactly A or exactly B (every file hash equal to one of the two manifests).

Writers covered: export.writer.write_artifact (the artifact writer, in a tight loop so kills land
in every phase: file writes, fsync, the two renames), export.artifact.export_params (the whole
export, build and checks included), model.checkpoint.save_checkpoint, and
export.engine_build.update_manifest (the manifest rewrite a TensorRT build ends with; the
TensorRT build itself needs a GPU and is not run here).

Complementary to tests/export/test_artifact.py::test_killed_export_leaves_nothing_that_loads
(os._exit at one chosen write). Bounded: 24 trials in all, about 15 s on 2 cores (child start-up dominates).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import Counter

import _relutil as ru
import numpy as np
import pytest

from tickformer.artifact.reader import open_artifact
from tickformer.errors import ArtifactError, CheckpointError
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset
from tickformer.model.checkpoint import load_checkpoint, save_checkpoint

SEED = 20261202
CFG = preset("tiny")


def _run_and_kill(script: str, delay_s: float, *, ready_timeout: float = 120.0) -> int:
    """Start `script` in a child; after it prints READY wait delay_s and SIGKILL it. Returns the
    number of completed writes the child reported (lines 'DONE')."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    line = proc.stdout.readline()
    if line.strip() != "READY":
        proc.kill()
        raise AssertionError(f"child did not start: {line!r} {proc.stderr.read()[-2000:]}")
    time.sleep(delay_s)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, (
        f"child ended on its own ({proc.returncode}) before the kill: {err[-2000:]}"
    )
    return out.count("DONE")


def _classify_artifact(path, contents):
    """'A' / 'B' when `path` loads with exactly those file hashes; 'refused' on ArtifactError."""
    try:
        art = open_artifact(path)
    except ArtifactError:
        return "refused"
    files = art.manifest["files"]
    for name, expected in contents.items():
        if files == expected:
            params = art.params()  # loads, no pickle, and equals one of the two
            assert set(params) == set(init_params(CFG, 0))
            return name
    raise AssertionError(f"{path} passes the hash checks but is neither A nor B: {sorted(files)}")


def _check_dir(parent, target, contents, classify):
    """Outcome of the target ('A', 'B', 'none' or 'refused') after checking every leftover."""
    for entry in parent.iterdir():
        if entry == target or not entry.is_dir():
            continue
        for sub in [entry, *[p for p in entry.iterdir() if p.is_dir()]]:  # .old-*/artifact holds a whole copy
            assert classify(sub, contents) in ("A", "B", "refused")
    if not target.exists():
        return "none"
    state = classify(target, contents)
    assert state in ("A", "B"), f"the target exists but is {state}: a half-written artifact"
    return state


def _label(state, parent):
    """Outcome label for the report: which content, and whether hidden temp directories stayed."""
    label = {"A": "A (valid)", "B": "B (valid)", "none": "absent"}[state]
    if any(p.name.startswith(".") for p in parent.iterdir()):
        label += " + hidden temp dir left"
    return label


@pytest.fixture(scope="module")
def two_artifacts(tmp_path_factory):
    """Two exported artifacts with different weights: A (seed 0) and B (seed 1)."""
    root = tmp_path_factory.mktemp("kill-src")
    out = {}
    for name, seed in (("A", 0), ("B", 1)):
        export_params(CFG, init_params(CFG, seed), root / name, lengths=[1, 16])
        out[name] = root / name
    return out


def _contents(two):
    return {name: ru.read_json(path / ru.ART_MANIFEST)["files"] for name, path in two.items()}


WRITE_ATOMIC_CHILD = """
import json, sys
from pathlib import Path
from tickformer.export.writer import write_artifact
srcs = [Path(p) for p in {srcs!r}]
sets = []
for src in srcs:
    manifest = json.loads((src / "manifest.json").read_text())
    sets.append(({{n: (src / n).read_bytes() for n in manifest["files"]}}, manifest))
print("READY", flush=True)
i = 1
while True:
    files, manifest = sets[i % 2]
    write_artifact(Path({out!r}), files, manifest)
    print("DONE", flush=True)
    i += 1
"""

EXPORT_CHILD = """
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset
cfg = preset("tiny")
params = [init_params(cfg, 0), init_params(cfg, 1)]
print("READY", flush=True)
i = 1
while True:
    export_params(cfg, params[i % 2], {out!r}, lengths=[1, 16])
    print("DONE", flush=True)
    i += 1
"""


@pytest.mark.parametrize(
    "writer, trials, max_delay",
    [pytest.param("write_atomic", 10, 0.25, marks=pytest.mark.slow), ("export_params", 3, 1.2)],
)
def test_killed_artifact_writer_leaves_old_new_or_nothing(
    two_artifacts, tmp_path, outcomes, writer, trials, max_delay
):
    rng = np.random.default_rng(SEED + trials)
    contents = _contents(two_artifacts)
    kind = f"kill: {writer} SIGKILLed at a random moment (artifact)"
    outcomes.describe(
        kind,
        f"child overwrites the artifact in a loop alternating A/B; SIGKILL after U(0, {max_delay}) s; "
        "target must load as exactly A or B, or be absent",
    )
    states = Counter()
    for trial in range(trials):
        parent = tmp_path / f"t{trial}"
        out = parent / "art"
        ru.fresh_copy(two_artifacts["A"], out)
        template = WRITE_ATOMIC_CHILD if writer == "write_atomic" else EXPORT_CHILD
        script = template.format(srcs=[str(two_artifacts["A"]), str(two_artifacts["B"])], out=str(out))
        _run_and_kill(script, float(rng.uniform(0, max_delay)))
        state = _check_dir(parent, out, contents, _classify_artifact)
        outcomes.record(kind, _label(state, parent))
        states[state] += 1
    assert sum(states.values()) == trials


CHECKPOINT_CHILD = """
from tickformer.model import init_params, preset
from tickformer.model.checkpoint import save_checkpoint
cfg = preset("tiny")
params = [init_params(cfg, 0), init_params(cfg, 1)]
print("READY", flush=True)
i = 1
while True:
    save_checkpoint({out!r}, cfg, params[i % 2], {{"i": i}}, extra_files={{"metrics.json": b"{{}}"}})
    print("DONE", flush=True)
    i += 1
"""


def _classify_checkpoint(path, params):
    try:
        ckpt = load_checkpoint(path)
    except CheckpointError:
        return "refused"
    for name, p in params.items():
        if all(np.array_equal(ckpt.params[k], p[k]) for k in p):
            return name
    raise AssertionError(f"{path} loads but holds neither A's nor B's weights")


def test_killed_checkpoint_save_leaves_old_new_or_nothing(tmp_path, outcomes):
    rng = np.random.default_rng(SEED)
    params = {"A": init_params(CFG, 0), "B": init_params(CFG, 1)}
    kind = "kill: save_checkpoint SIGKILLed at a random moment"
    outcomes.describe(
        kind,
        "child overwrites the checkpoint in a loop alternating A/B; SIGKILL after U(0, 0.3) s; must "
        "load as exactly A or B, or be absent",
    )
    for trial in range(8):
        parent = tmp_path / f"t{trial}"
        out = parent / "ckpt"
        save_checkpoint(out, CFG, params["A"], {"i": 0}, extra_files={"metrics.json": b"{}"})
        _run_and_kill(CHECKPOINT_CHILD.format(out=str(out)), float(rng.uniform(0, 0.3)))
        state = _check_dir(parent, out, params, _classify_checkpoint)
        outcomes.record(kind, _label(state, parent))


MANIFEST_CHILD = """
from pathlib import Path
from tickformer.export.engines import update_manifest
print("READY", flush=True)
i = 0
while True:
    update_manifest(Path({out!r}), lambda m: m["source"].__setitem__("rewrites", i))
    print("DONE", flush=True)
    i += 1
"""


def test_killed_manifest_rewrite_leaves_a_valid_manifest(two_artifacts, tmp_path, outcomes):
    """engine_build.update_manifest (temp file + os.replace) killed mid-loop: the manifest is
    always the old or the new one, the artifact always loads."""
    rng = np.random.default_rng(SEED + 1)
    contents = _contents(two_artifacts)
    kind = "kill: engine_build.update_manifest SIGKILLed at a random moment"
    outcomes.describe(
        kind,
        "child rewrites manifest.json in a loop (what a TensorRT build ends with); SIGKILL after U(0, "
        "0.3) s; must still load as A",
    )
    for trial in range(3):
        out = ru.fresh_copy(two_artifacts["A"], tmp_path / f"t{trial}" / "art")
        done = _run_and_kill(MANIFEST_CHILD.format(out=str(out)), float(rng.uniform(0, 0.3)))
        assert _classify_artifact(out, contents) == "A"
        rewrites = ru.read_json(out / ru.ART_MANIFEST)["source"].get("rewrites", -1)
        assert rewrites in (done - 1, done, done + 1) or done == 0
        leftovers = [p.name for p in out.iterdir() if p.name.startswith(".")]
        assert all(name.endswith(".tmp") for name in leftovers), leftovers
        outcomes.record(kind, "loads (old or new manifest)")
