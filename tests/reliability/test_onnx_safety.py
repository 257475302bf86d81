"""ONNX files and weights from an untrusted artifact: no reads outside the artifact, no crash, no
hang, no pickle.

The attacker model here is stronger than a bit flip: whoever wrote the artifact also rewrote
manifest.json with matching hashes (the manifest is not signed), so the loaders' *parsers* must
hold. Graph loads run in a child process (`_relutil.Worker`): a native crash or a hang there is
reported as such instead of taking pytest down.

Sources: onnx.external_data_helper (TensorProto.data_location / external_data "location");
numpy.load(allow_pickle=False) refuses object arrays (numpy docs, "numpy.load").
"""

from __future__ import annotations

import io
import json
import os
import pickle
import time
import zipfile

import _relutil as ru
import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, numpy_helper
from onnx.external_data_helper import convert_model_to_external_data

from tickformer import runtime
from tickformer.artifact.reader import open_artifact
from tickformer.errors import ArtifactError, CheckpointError, TickformerError
from tickformer.model.checkpoint import load_checkpoint


def _rehash_artifact(art, *names):
    ru.rehash(art, ru.ART_MANIFEST, list(names))


def _externalize(art, location, *, place, list_data=False):
    """Rewrite ART/step.onnx so its large initializers live in external data at `location`;
    place(data) puts the external bytes where `location` points. The manifest is re-hashed
    (an attacker controls it). list_data: also list the data file in the manifest."""
    model = onnx.load(str(art / "step.onnx"))
    convert_model_to_external_data(
        model, all_tensors_to_one_file=True, location="tmp.bin", size_threshold=256
    )
    onnx.save_model(model, str(art / "step.onnx"))  # writes ART/tmp.bin (onnx refuses other locations)
    data = (art / "tmp.bin").read_bytes()
    (art / "tmp.bin").unlink()
    model = onnx.load(str(art / "step.onnx"), load_external_data=False)
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = location  # written by hand: what a hostile artifact can hold
    (art / "step.onnx").write_bytes(model.SerializeToString())
    place(data)
    _rehash_artifact(art, "step.onnx")
    if list_data:
        manifest = ru.read_json(art / ru.ART_MANIFEST)
        manifest["files"][location] = {"sha256": ru.sha256(data), "bytes": len(data)}
        ru.write_json(art / ru.ART_MANIFEST, ru.resealed(manifest))
    return data


def _place_at(path):
    def place(data):
        with open(path, "wb") as handle:
            handle.write(data)

    return place


def _place_symlink(link, target):
    def place(data):
        with open(target, "wb") as handle:
            handle.write(data)
        os.symlink(target, link)

    return place


OUTSIDE_CASES = ["absolute path", "dot-dot", "symlink inside pointing outside"]


def _outside_case(art, tmp_path, case):
    outside = tmp_path / "outside"
    outside.mkdir(exist_ok=True)
    if case == "absolute path":
        location = str(outside / "abs.bin")
        _externalize(art, location, place=_place_at(location))
    elif case == "dot-dot":
        location = "../outside/up.bin"
        _externalize(art, location, place=_place_at(str(outside / "up.bin")))
    else:
        location = "link.bin"
        _externalize(
            art,
            location,
            place=_place_symlink(str(art / "link.bin"), str(outside / "target.bin")),
            list_data=False,
        )
    return location


@pytest.mark.parametrize("case", OUTSIDE_CASES)
def test_external_data_outside_the_artifact_is_refused(art_src, tmp_path, worker, outcomes, case):
    """Refused with our exception type (today by onnxruntime's own external-data path check,
    wrapped in BackendError by runtime/backends/ort.py), never loaded."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    _outside_case(art, tmp_path, case)
    kind = "onnx: external data outside the artifact (abs, .., symlink), load(ort) in a child"
    outcomes.describe(
        kind,
        "step.onnx rewritten to read its initializers from outside the artifact, hashes recomputed; "
        "must be refused with a TickformerError",
    )
    start = time.perf_counter_ns()
    reply = worker.load(art, "ort")
    outcomes.record(kind, reply["outcome"], (time.perf_counter_ns() - start) / 1e9)
    assert reply["outcome"] in ("ArtifactError", "BackendError"), reply


@pytest.mark.parametrize("case", OUTSIDE_CASES)
def test_external_data_is_refused_by_our_check_before_onnxruntime(art_src, tmp_path, monkeypatch, case):
    """Regression: our own check refuses external data (runtime.artifact.verified_graph_bytes),
    before onnxruntime sees the graph. The symlink case is refused even earlier, as an unlisted
    file of the artifact."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    _outside_case(art, tmp_path, case)

    def forbidden(*args, **kwargs):
        raise AssertionError("onnxruntime was given a graph with external data")

    monkeypatch.setattr(onnxruntime, "InferenceSession", forbidden)
    words = r"unlisted files \['link.bin'\]" if case == "symlink inside pointing outside" else "external"
    with pytest.raises(ArtifactError, match=words):
        runtime.load(art, backend="ort")


def test_external_data_in_an_unlisted_file_is_refused(art_src, tmp_path):
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    _externalize(art, "inside.bin", place=_place_at(str(art / "inside.bin")), list_data=False)
    with pytest.raises(TickformerError):
        with runtime.load(art, backend="ort") as session:
            session.step(np.zeros(session.input_shape, session.input_dtype))


def test_external_data_in_a_listed_and_hashed_file_is_refused_too(art_src, tmp_path):
    """Even hashed, external data is refused: every byte a backend runs comes from the one
    verified read of the graph file (no second open by another path)."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    _externalize(art, "inside.bin", place=_place_at(str(art / "inside.bin")), list_data=True)
    with pytest.raises(ArtifactError, match="step.onnx.*external"):
        runtime.load(art, backend="ort")


def test_listed_file_that_is_a_symlink_out_of_the_artifact_is_refused(art_src, tmp_path):
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    outside = tmp_path / "elsewhere.npz"
    os.replace(art / "weights.npz", outside)
    os.symlink(outside, art / "weights.npz")
    with pytest.raises(ArtifactError, match="weights.npz"):
        open_artifact(art)


def test_graph_swapped_after_verification_is_not_run(art_src, tokens_src, tmp_path):
    """The backend runs the bytes verified at open (Artifact.files), never the file by path: a
    step.onnx swapped after open_artifact (same graph, zero weights) is not what runs."""
    from tickformer.runtime.backends import backend_class

    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    artifact = open_artifact(art)  # hashes verified here, bytes kept
    model = onnx.load(str(art / "step.onnx"))
    for tensor in model.graph.initializer:  # same graph, other weights: loads and runs fine
        if tensor.data_type == TensorProto.FLOAT:
            tensor.CopyFrom(
                numpy_helper.from_array(np.zeros_like(numpy_helper.to_array(tensor)), tensor.name)
            )
    (art / "step.onnx").write_bytes(model.SerializeToString())
    x = np.full((1, 1, 3), 0.5, np.float32)
    swapped = backend_class("ort")(artifact).step(x, 0).copy()
    reference = backend_class("ort")(open_artifact(art_src[0])).step(x, 0).copy()
    np.testing.assert_array_equal(swapped, reference)
    with pytest.raises(ArtifactError, match="step.onnx: SHA-256"):  # a fresh open sees the swap
        open_artifact(art)


# --- malformed and oversized protobufs -----------------------------------------------------------------
def _varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, payload):
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _deeply_nested_model(depth):
    """ModelProto.graph -> node -> attribute.g -> node -> ... `depth` levels of subgraphs."""
    graph = b""
    for _ in range(depth):
        attribute = _field(1, b"body") + _field(6, graph)  # AttributeProto{name, g}
        node = _field(4, b"If") + _field(5, attribute)  # NodeProto{op_type, attribute}
        graph = _field(1, node)  # GraphProto{node}
    return _varint(1 << 3) + _varint(8) + _field(7, graph)  # ModelProto{ir_version 8, graph}


def _huge_initializer_model(step_bytes):
    """The real step graph plus an initializer that declares 2^40 floats and carries 4 bytes."""
    model = onnx.load_from_string(step_bytes)
    huge = TensorProto(
        name="huge", data_type=TensorProto.FLOAT, dims=[1 << 20, 1 << 20], raw_data=b"\0\0\0\0"
    )
    model.graph.initializer.append(huge)  # built by hand: onnx.helper refuses the size mismatch
    return model.SerializeToString()


def _future_model(step_bytes):
    model = onnx.load_from_string(step_bytes)
    model.ir_version = 99
    model.opset_import[0].version = 99
    return model.SerializeToString()


MALFORMED = {
    "empty": lambda b: b"",
    "random bytes": lambda b: np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes(),
    "truncated in half": lambda b: b[: len(b) // 2],
    "length prefix 2^62": lambda b: _varint(7 << 3 | 2) + _varint(1 << 62) + b"\0" * 64,
    "subgraphs nested 5000 deep": lambda b: _deeply_nested_model(5000),
    "initializer declaring 2^40 floats": _huge_initializer_model,
    "ir_version and opset 99": _future_model,
    "16 MiB of 0xFF": lambda b: b"\xff" * (16 << 20),
    "model.onnx in place of step.onnx": None,  # a valid graph with the wrong signature
}


def _malformed_cases():
    out = []
    for case in sorted(MALFORMED):
        out.append(pytest.param(case, id=case))
    return out


@pytest.mark.parametrize("case", _malformed_cases())
def test_malformed_or_oversized_step_graph_gives_our_error(art_src, tmp_path, worker, outcomes, case):
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    original = (art / "step.onnx").read_bytes()
    make = MALFORMED[case]
    data = (art / "model.onnx").read_bytes() if make is None else make(original)
    (art / "step.onnx").write_bytes(data)
    _rehash_artifact(art, "step.onnx")
    kind = "onnx: malformed / oversized step.onnx, hashes recomputed, load(ort) + step in a child"
    outcomes.describe(
        kind,
        "empty, random, truncated, 2^62 length prefix, 5000-deep subgraphs, 2^40-float initializer, "
        "future ir_version/opset, 16 MiB of 0xFF, wrong valid graph; must be a TickformerError (no crash, no hang)",
    )
    start = time.perf_counter_ns()
    reply = worker.load(art, "ort")
    outcomes.record(kind, reply["outcome"], (time.perf_counter_ns() - start) / 1e9)
    allowed = {"ArtifactError", "BackendError"}
    if case == "model.onnx in place of step.onnx":
        allowed = {"ArtifactError"}  # a valid graph of another signature: refused by our I/O check
    if case == "initializer declaring 2^40 floats":
        allowed.add("success")  # onnxruntime drops the unused initializer without reading it: harmless
    assert reply["outcome"] in allowed, reply
    assert "\n" not in reply["message"].strip()


@pytest.mark.parametrize(
    "manifest_name, loader, error",
    [
        (ru.ART_MANIFEST, open_artifact, ArtifactError),
        (ru.CKPT_MANIFEST, load_checkpoint, CheckpointError),
    ],
)
@pytest.mark.parametrize(
    "payload",
    ["nested 100000 deep", "50 MiB of spaces", "NaN and Infinity tokens", "duplicate keys", "not utf-8"],
)
def test_hostile_manifest_json_gives_our_error(
    art_src, ckpt_src, tmp_path, manifest_name, loader, error, payload, request
):
    src = art_src[0] if manifest_name == ru.ART_MANIFEST else ckpt_src[0]
    root = ru.fresh_copy(src, tmp_path / "root")
    text = (root / manifest_name).read_text()
    if payload == "nested 100000 deep":
        data = ("[" * 100_000 + "]" * 100_000).encode()
    elif payload == "50 MiB of spaces":
        data = (" " * (50 << 20) + "[]").encode()
    elif payload == "NaN and Infinity tokens":
        manifest = json.loads(text)
        manifest["version"] = float("nan")
        data = json.dumps(manifest).encode()
    elif payload == "duplicate keys":  # the last "format" wins in json.loads: still refused
        data = (
            text.replace('"format":', '"format": "x", "format":', 1)
            .replace('"tickformer-', '"other-', 1)
            .encode()
        )
    else:
        data = b"\xff\xfe" + text.encode("utf-16-le")
    (root / manifest_name).write_bytes(data)
    with pytest.raises(error):
        loader(root)


# --- weights without pickle ------------------------------------------------------------------------------
class _Trap:
    """Unpickling this creates the file `path`: proof that code ran during a load."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _npz_with_object_array(params, trap_path):
    """A weights.npz whose first parameter is replaced by a pickled object array."""
    buffer = io.BytesIO()
    arrays = dict(params)
    first = sorted(arrays)[0]
    obj = np.empty(1, dtype=object)
    obj[0] = _Trap(str(trap_path))
    arrays[first] = obj
    np.savez(buffer, **arrays)
    data = buffer.getvalue()
    with zipfile.ZipFile(io.BytesIO(data)) as archive:  # sanity: the pickle really is in there
        assert any(b"open" in archive.read(n) for n in archive.namelist())
    return data


def test_pickle_payload_in_artifact_weights_is_refused_and_never_runs(art_src, tmp_path, outcomes):
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    trap = tmp_path / "PWNED"
    (art / "weights.npz").write_bytes(_npz_with_object_array(art_src[1], trap))
    _rehash_artifact(art, "weights.npz")
    kind = "weights: .npz with a pickled object array (hash recomputed)"
    outcomes.describe(
        kind,
        "an object array whose unpickling would create a file; must be refused, and the file must not exist",
    )
    with pytest.raises(ArtifactError, match="weights.npz"):
        outcomes.run(kind, lambda: runtime.load(art, backend="numpy"), reraise=True)
    assert not trap.exists(), "unpickling ran code"
    # the payload is live: loading it with pickle allowed would run it (so the refusal matters)
    with np.load(art / "weights.npz", allow_pickle=True) as archive:
        archive[sorted(archive.files)[0]]
    assert trap.exists()


def test_pickle_payload_in_checkpoint_weights_is_refused_and_never_runs(ckpt_src, tmp_path, outcomes):
    ckpt = ru.fresh_copy(ckpt_src[0], tmp_path / "ckpt")
    trap = tmp_path / "PWNED"
    (ckpt / "weights.npz").write_bytes(_npz_with_object_array(ckpt_src[1], trap))
    ru.rehash(ckpt, ru.CKPT_MANIFEST, ["weights.npz"])
    kind = "weights: .npz with a pickled object array (hash recomputed)"
    with pytest.raises(CheckpointError, match="weights.npz"):
        outcomes.run(kind, lambda: load_checkpoint(ckpt), reraise=True)
    assert not trap.exists(), "unpickling ran code"


def test_loaders_never_call_pickle(art_src, ckpt_src, monkeypatch):
    """Valid loads of an artifact (numpy and ort backends) and a checkpoint never unpickle."""

    def forbidden(*args, **kwargs):
        raise AssertionError("pickle was used by a loader")

    monkeypatch.setattr(pickle, "loads", forbidden)
    monkeypatch.setattr(pickle, "load", forbidden)
    monkeypatch.setattr(pickle, "Unpickler", forbidden)
    for backend in ("numpy", "ort"):
        with runtime.load(art_src[0], backend=backend) as session:
            session.step(np.zeros(session.input_shape, session.input_dtype))
    load_checkpoint(ckpt_src[0])
