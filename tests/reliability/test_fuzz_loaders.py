"""Fuzzing the artifact and checkpoint loaders with Hypothesis: every mutated input ends in a
TickformerError subclass or in success, never in anything else.

Classes of mutation (each its own test, its counts in docs/reliability_report.md):

    bytes, hash kept      flip / truncate / insert / delete / overwrite in a hashed file; the
                          manifest still has the old hash -> must be refused by the hash check
    bytes, hash recomputed  the same mutations with the manifest re-hashed, so the *parser* of
                          the file runs (weights.npz and config.json in-process; step.onnx in a
                          child process, so an onnxruntime crash or hang is observed, not suffered)
    JSON fields           one field of manifest.json / checkpoint.json / config.json deleted or
                          replaced by a hostile value (wrong type, NaN, huge, negative, nested),
                          hashes recomputed where the file is hashed

A case = load (runtime.load on the numpy and ort backends, or load_checkpoint) + one step of
zeros, then close. Cases that end in another exception are collected, not raised at once, so a
run counts every case; the test then fails listing the first few. Known defects of the loaders
are marked xfail(strict=True) with the file and the fix. Manifests carry their own SHA-256:
the mutations that must reach the schema checks recompute it (`_relutil.resealed`).

Bounded in time: example counts below (random examples from the run's seed under the `ci`
profile, fixed ones under `repro`: tests/conftest.py), ~30 s in all on 2 cores.
"""

from __future__ import annotations

import math
import time

import _relutil as ru
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tickformer import runtime
from tickformer.model.checkpoint import load_checkpoint

ARTIFACT_FILES = ["model.onnx", "step.onnx", "weights.npz"]
CHECKPOINT_FILES = ["config.json", "weights.npz", "metrics.json"]
FUZZ = settings(
    deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)


# --- strategies -----------------------------------------------------------------------------------------
@st.composite
def byte_mutations(draw, size: int):
    """(description, function bytes -> bytes) that really changes a file of `size` bytes."""
    op = draw(st.sampled_from(["flip", "truncate", "insert", "delete", "overwrite"]))
    at = draw(st.integers(0, size - 1))
    if op == "flip":
        mask = draw(st.integers(1, 255))
        return f"flip byte {at} ^ {mask:#x}", lambda b: ru.flip(b, at, mask)
    if op == "truncate":
        return f"truncate to {at} bytes", lambda b: b[:at]
    if op == "insert":
        extra = draw(st.binary(min_size=1, max_size=16))
        return f"insert {extra!r} at {at}", lambda b: b[:at] + extra + b[at:]
    if op == "delete":
        n = draw(st.integers(1, 16))
        return f"delete {n} bytes at {at}", lambda b: b[:at] + b[at + n :]
    chunk = draw(st.binary(min_size=1, max_size=16))
    return (
        f"overwrite {chunk!r} at {at}",
        lambda b: (
            b[:at] + chunk + b[at + len(chunk) :] if b[at : at + len(chunk)] != chunk else ru.flip(b, at)
        ),
    )


HOSTILE_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**16), 2**16),
    st.sampled_from([0, -1, 2**62, -(2**62)]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(["../../etc/passwd", "/etc/passwd", "model.onnx", "step.onnx", "weights.npz", "", "."]),
    st.lists(st.integers(-3, 20), max_size=4),
    st.dictionaries(st.text(max_size=4), st.integers(0, 3), max_size=2),
)


@st.composite
def json_mutations(draw, document):
    """(description, function doc -> None) deleting or replacing one value of the document."""
    paths = ru.json_paths(document)
    path = draw(st.sampled_from(paths))
    op = draw(st.sampled_from(["replace", "replace", "delete", "tweak"]))
    if op == "delete":
        return f"delete {path}", lambda d: ru.json_delete(d, path)
    value = ru.json_get(document, path)
    if op == "tweak" and isinstance(value, (int, float)) and not isinstance(value, bool):
        delta = draw(st.sampled_from([-1, 1, 2, 10, -100]))
        new = (
            value + delta if isinstance(value, int) else value * draw(st.sampled_from([-1.0, 0.5, 2.0, 1e30]))
        )
    else:
        new = draw(HOSTILE_VALUES)
    return f"set {path} = {new!r}", lambda d: ru.json_set(d, path, new)


# --- one case --------------------------------------------------------------------------------------------
def _load_and_step(root, backend):
    with runtime.load(root, backend=backend) as session:
        session.step(np.zeros(session.input_shape, session.input_dtype))


def _artifact_case(root):
    _load_and_step(root, "numpy")
    _load_and_step(root, "ort")


class Campaign:
    """Runs cases of one class, counts outcomes, keeps the defects (unexpected exceptions)."""

    def __init__(self, outcomes, kind, note):
        self.outcomes, self.kind = outcomes, kind
        self.defects: list[str] = []
        outcomes.describe(kind, note)

    def case(self, description, call, *, allowed=None):
        outcome, exc = self.outcomes.sweep(self.kind, call)
        if exc is not None:
            self.defects.append(f"{description}: {type(exc).__name__}: {str(exc)[:120]}")
        elif allowed is not None and outcome not in allowed:
            self.defects.append(f"{description}: ended in {outcome}, expected one of {sorted(allowed)}")

    def check(self):
        if self.defects:
            self.outcomes.defects[self.kind] = list(self.defects)
        assert not self.defects, f"{len(self.defects)} defect(s); first: " + " | ".join(self.defects[:4])


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


# --- bytes, hash kept: the hash check must catch every one --------------------------------------------------
def test_fuzz_artifact_bytes_without_rehash_are_refused_by_the_hash_check(art_src, scratch, outcomes):
    camp = Campaign(
        outcomes,
        "fuzz: artifact file bytes mutated, manifest hash kept",
        "flip/truncate/insert/delete/overwrite in model.onnx, step.onnx or weights.npz; must be "
        "ArtifactError (hash or size)",
    )
    root = ru.fresh_copy(art_src[0], scratch / "a1")
    originals = {name: (root / name).read_bytes() for name in ARTIFACT_FILES}

    @settings(FUZZ, max_examples=150)
    @given(data=st.data())
    def run(data):
        name = data.draw(st.sampled_from(ARTIFACT_FILES))
        description, mutate = data.draw(byte_mutations(len(originals[name])))
        (root / name).write_bytes(mutate(originals[name]))
        try:
            camp.case(
                f"{name}: {description}", lambda: _load_and_step(root, "ort"), allowed={"ArtifactError"}
            )
        finally:
            (root / name).write_bytes(originals[name])

    run()
    camp.check()


def test_fuzz_checkpoint_bytes_without_rehash_are_refused_by_the_hash_check(ckpt_src, scratch, outcomes):
    camp = Campaign(
        outcomes,
        "fuzz: checkpoint file bytes mutated, manifest hash kept",
        "flip/truncate/insert/delete/overwrite in config.json, weights.npz or metrics.json; must be CheckpointError",
    )
    root = ru.fresh_copy(ckpt_src[0], scratch / "c1")
    originals = {name: (root / name).read_bytes() for name in CHECKPOINT_FILES}

    @settings(FUZZ, max_examples=150)
    @given(data=st.data())
    def run(data):
        name = data.draw(st.sampled_from(CHECKPOINT_FILES))
        description, mutate = data.draw(byte_mutations(len(originals[name])))
        (root / name).write_bytes(mutate(originals[name]))
        try:
            camp.case(f"{name}: {description}", lambda: load_checkpoint(root), allowed={"CheckpointError"})
        finally:
            (root / name).write_bytes(originals[name])

    run()
    camp.check()


# --- bytes, hash recomputed: the parsers run ----------------------------------------------------------------
def test_fuzz_artifact_weights_parser(art_src, scratch, outcomes):
    camp = Campaign(
        outcomes,
        "fuzz: artifact weights.npz bytes mutated, hash recomputed, load(numpy, ort) + step",
        "the npz parser (np.load, allow_pickle=False) and the weight checks run on mutated bytes",
    )
    root = ru.fresh_copy(art_src[0], scratch / "a2")
    original = (root / "weights.npz").read_bytes()
    manifest = (root / ru.ART_MANIFEST).read_bytes()

    @settings(FUZZ, max_examples=80)
    @given(mutation=byte_mutations(len(original)))
    def run(mutation):
        description, mutate = mutation
        (root / "weights.npz").write_bytes(mutate(original))
        ru.rehash(root, ru.ART_MANIFEST, ["weights.npz"])
        try:
            camp.case(f"weights.npz: {description}", lambda: _artifact_case(root))
        finally:
            (root / "weights.npz").write_bytes(original)
            (root / ru.ART_MANIFEST).write_bytes(manifest)

    run()
    camp.check()


def test_fuzz_checkpoint_parsers(ckpt_src, scratch, outcomes):
    camp = Campaign(
        outcomes,
        "fuzz: checkpoint config.json / weights.npz bytes mutated, hash recomputed",
        "the JSON, config and npz parsers of load_checkpoint run on mutated bytes",
    )
    root = ru.fresh_copy(ckpt_src[0], scratch / "c2")
    originals = {name: (root / name).read_bytes() for name in ("config.json", "weights.npz")}
    manifest = (root / ru.CKPT_MANIFEST).read_bytes()

    @settings(FUZZ, max_examples=100)
    @given(data=st.data())
    def run(data):
        name = data.draw(st.sampled_from(sorted(originals)))
        description, mutate = data.draw(byte_mutations(len(originals[name])))
        (root / name).write_bytes(mutate(originals[name]))
        ru.rehash(root, ru.CKPT_MANIFEST, [name])
        try:
            camp.case(f"{name}: {description}", lambda: load_checkpoint(root))
        finally:
            (root / name).write_bytes(originals[name])
            (root / ru.CKPT_MANIFEST).write_bytes(manifest)

    run()
    camp.check()


def test_fuzz_step_graph_parser_in_a_child_process(art_src, scratch, outcomes, worker):
    """step.onnx mutated and re-hashed, loaded by onnxruntime in a child: our error or success,
    never a crash (CRASH) or a hang (HANG, 60 s)."""
    camp = Campaign(
        outcomes,
        "fuzz: step.onnx bytes mutated, hash recomputed, load(ort) + step in a child",
        "onnxruntime parses mutated protobufs; a crash or hang of the child would be recorded as CRASH/HANG",
    )
    root = ru.fresh_copy(art_src[0], scratch / "a3")
    original = (root / "step.onnx").read_bytes()
    manifest = (root / ru.ART_MANIFEST).read_bytes()

    @settings(FUZZ, max_examples=40)
    @given(mutation=byte_mutations(len(original)))
    def run(mutation):
        description, mutate = mutation
        (root / "step.onnx").write_bytes(mutate(original))
        ru.rehash(root, ru.ART_MANIFEST, ["step.onnx"])
        try:
            start = time.perf_counter_ns()
            reply = worker.load(root, "ort")
            outcomes.record(camp.kind, reply["outcome"], (time.perf_counter_ns() - start) / 1e9)
            if reply["outcome"] != "success" and reply["outcome"] not in ("ArtifactError", "BackendError"):
                camp.defects.append(f"step.onnx: {description}: {reply}")
        finally:
            (root / "step.onnx").write_bytes(original)
            (root / ru.ART_MANIFEST).write_bytes(manifest)

    run()
    camp.check()


# --- JSON fields ---------------------------------------------------------------------------------------------
def test_fuzz_artifact_manifest_fields(art_src, scratch, outcomes):
    camp = Campaign(
        outcomes,
        "fuzz: manifest.json field deleted / replaced, load(numpy, ort) + step",
        "one value anywhere in manifest.json deleted, replaced by a hostile value or tweaked; its self-hash recomputed "
        "(unless the mutation hit it) so the schema checks run",
    )
    root = ru.fresh_copy(art_src[0], scratch / "a4")
    text = (root / ru.ART_MANIFEST).read_bytes()
    document = ru.read_json(root / ru.ART_MANIFEST)

    @settings(FUZZ, max_examples=120)
    @given(mutation=json_mutations(document))
    def run(mutation):
        description, mutate = mutation
        doc = ru.read_json(root / ru.ART_MANIFEST)
        mutate(doc)
        ru.write_json(root / ru.ART_MANIFEST, ru.resealed(doc, document))
        try:
            camp.case(description, lambda: _artifact_case(root))
        finally:
            (root / ru.ART_MANIFEST).write_bytes(text)

    run()
    camp.check()


def test_fuzz_checkpoint_json_fields(ckpt_src, scratch, outcomes):
    camp = Campaign(
        outcomes,
        "fuzz: checkpoint.json / config.json field deleted / replaced, hash recomputed",
        "one value of checkpoint.json, or of config.json with its hash recomputed, deleted or replaced "
        "by a hostile value",
    )
    root = ru.fresh_copy(ckpt_src[0], scratch / "c3")
    originals = {name: (root / name).read_bytes() for name in (ru.CKPT_MANIFEST, "config.json")}
    documents = {name: ru.read_json(root / name) for name in originals}

    @settings(FUZZ, max_examples=120)
    @given(data=st.data())
    def run(data):
        name = data.draw(st.sampled_from(sorted(originals)))
        description, mutate = data.draw(json_mutations(documents[name]))
        doc = ru.read_json(root / name)
        mutate(doc)
        ru.write_json(root / name, ru.resealed(doc, documents[name]) if name == ru.CKPT_MANIFEST else doc)
        if name == "config.json":
            ru.rehash(root, ru.CKPT_MANIFEST, ["config.json"])
        try:
            camp.case(f"{name}: {description}", lambda: load_checkpoint(root))
        finally:
            for n, data_ in originals.items():
                (root / n).write_bytes(data_)

    run()
    camp.check()


def test_strategies_really_mutate():
    """The byte strategy always changes the bytes; the JSON strategy reaches nested paths."""
    original = bytes(range(256)) * 4
    changed = 0

    @settings(max_examples=50, deadline=None)
    @given(mutation=byte_mutations(len(original)))
    def run(mutation):
        nonlocal changed
        changed += mutation[1](original) != original

    run()
    assert changed == 50
    paths = ru.json_paths({"a": {"b": [1, {"c": math.pi}]}})
    assert ("a", "b", 1, "c") in paths and len(paths) == 5


# --- an inflated config, found by the manifest fuzz in CI --------------------------------------------------
# n_layers = 2^62 in a resealed manifest.json had the artifact reader enumerate that many layers' graph
# inputs (format.expected_io) until the CI machine ran out of memory and killed pytest. Both loaders now
# refuse a config whose parameters do not fit in its weights.npz (model.checkpoint.check_weights_size, O(1))
# before anything is enumerated. Each load runs in a child with 2 GiB of address space and a time limit,
# so the defect, should it return, fails the test instead of the machine.
_CHILD = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
from tickformer.errors import TickformerError
try:
    if sys.argv[1] == "artifact":
        from tickformer import runtime
        runtime.load(sys.argv[2], backend="numpy")
    else:
        from tickformer.model.checkpoint import load_checkpoint
        load_checkpoint(sys.argv[2])
    print("success")
except TickformerError as exc:
    print(type(exc).__name__, exc)
"""


def _load_in_child(kind: str, root) -> str:
    import subprocess
    import sys

    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, kind, str(root)], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        return "HANG"
    return done.stdout.strip() or f"exit {done.returncode}: {done.stderr.strip()[-300:]}"


@pytest.mark.parametrize("field", ["n_layers", "d_model", "d_ff"])
def test_an_inflated_config_is_refused_before_it_is_enumerated(art_src, ckpt_src, scratch, field):
    root = ru.fresh_copy(art_src[0], scratch / f"inflated-art-{field}")
    document = ru.read_json(root / ru.ART_MANIFEST)
    doc = ru.read_json(root / ru.ART_MANIFEST)
    doc["config"][field] = 2**62
    ru.write_json(root / ru.ART_MANIFEST, ru.resealed(doc, document))
    reply = _load_in_child("artifact", root)
    # refused by the manifest's range check (artifact/ranges.py) before the weights are enumerated
    assert reply.startswith("ArtifactError") and f"config.{field} = {2**62} is outside" in reply, reply

    root = ru.fresh_copy(ckpt_src[0], scratch / f"inflated-ckpt-{field}")
    config = ru.read_json(root / "config.json")
    config[field] = 2**62
    ru.write_json(root / "config.json", config)
    ru.rehash(root, ru.CKPT_MANIFEST, ["config.json"])
    reply = _load_in_child("checkpoint", root)
    assert reply.startswith("CheckpointError") and "bytes of the weights" in reply, reply
