"""Artifacts exported before the re-cut (tests/artifact/fixtures/, commit a09c6da) still load and
run on every CPU backend, and the graph-weights check (export/consistency.py) still refuses a
re-sealed graph whose weights are not weights.npz's.

Before: the check compared every initializer by name, including the constants the graph builder
numbers in creation order (c_12, ...); the re-cut renumbered them, so ORT refused every older
artifact with "tensors ['c_12', ...] differ from the graph export builds from weights.npz ...
the graph does not run this artifact's weights", which was not true."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tickformer import runtime, sealed
from tickformer.artifact.reader import open_artifact, verified_graph_bytes
from tickformer.errors import ArtifactError
from tickformer.export.consistency import check_graph_weights, is_numbered, rebuilt_graphs

FIXTURES = Path(__file__).parent / "fixtures"
OLD = {"decoder": FIXTURES / "a09c6da-decoder", "seq2seq": FIXTURES / "a09c6da-seq2seq"}
WEIGHTS_DIFFER = "differ from the graph export builds from weights.npz"
OTHER_BUILDER = "structural constant\\(s\\) .* are none this tickformer's graph builder writes"


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _reseal_graph(art: Path, model: onnx.ModelProto, name: str = "step.onnx") -> None:
    """Write `model` as `name`, rehash it and re-seal the manifest: what a writer of the directory can do."""
    data = model.SerializeToString()
    (art / name).write_bytes(data)
    manifest = json.loads((art / "manifest.json").read_text())
    manifest["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    manifest.pop(sealed.MANIFEST_HASH)
    (art / "manifest.json").write_text(json.dumps(sealed.seal(manifest)))


def test_the_fixtures_are_numbered_differently_from_todays_builder():
    """The premise: keyed by number, the old step graphs' constants differ from today's (the old
    check's failure), keyed by value they are today's. If this fails, the builder changed again:
    the fixtures still test loading, but no longer the renumbering."""
    for path in OLD.values():
        art = open_artifact(path)
        stored = onnx.load_model_from_string(verified_graph_bytes(art, "step"))
        rebuilt = rebuilt_graphs(art)["step"]

        def numbered(m: onnx.ModelProto) -> dict[str, bytes]:
            return {t.name: t.SerializeToString() for t in m.graph.initializer if is_numbered(t.name)}

        assert numbered(stored) != numbered(rebuilt)
        assert len(stored.graph.node) != len(rebuilt.graph.node)  # wired by another builder


@pytest.mark.parametrize("kind", sorted(OLD))
def test_old_artifacts_load_and_agree_across_backends(kind):
    """Loads on numpy and ort; the old step graph run by ORT matches the numpy backend within the
    manifest's tolerance at every position, across a reset."""
    art = OLD[kind]
    check_graph_weights(open_artifact(art))
    with runtime.load(art, backend="numpy") as ref, runtime.load(art, backend="ort") as ort:
        tol, n = ref.artifact.tolerance, ref.artifact.max_len
        rng = np.random.default_rng(0)
        if kind == "seq2seq":
            src = rng.integers(0, 5, (1, n)).astype(np.int64)
            ref.set_source(src)
            ort.set_source(src)
            inputs = [rng.integers(0, 5, (1, 1)).astype(np.int64) for _ in range(2 * n)]
        else:
            inputs = [rng.uniform(-1, 1, (1, 1, 2)).astype(np.float32) for _ in range(2 * n)]
            seq = np.concatenate(inputs[:n], axis=1)
            np.testing.assert_allclose(ort.run(seq), ref.run(seq), atol=tol["atol"], rtol=tol["rtol"])
        for t, x in enumerate(inputs):
            if t == n:
                ref.reset()
                ort.reset()
            np.testing.assert_allclose(ort.step(x), ref.step(x), atol=tol["atol"], rtol=tol["rtol"])


def test_a_weight_renamed_to_a_number_is_still_a_weight(tmp_path):
    """Mutant: in_proj.w changed and stored under a builder-style number (c_999): the named set
    lacks in_proj.w, and the number's value is none the builder writes."""
    art = _copy(OLD["decoder"], tmp_path / "art")
    model = onnx.load(str(art / "step.onnx"))
    init = next(t for t in model.graph.initializer if t.name == "in_proj.w")
    value = numpy_helper.to_array(init) + 1.0
    init.CopyFrom(numpy_helper.from_array(value.astype(np.float32), "c_999"))
    for node in model.graph.node:
        node.input[:] = ["c_999" if i == "in_proj.w" else i for i in node.input]
    _reseal_graph(art, model)
    with pytest.raises(ArtifactError, match=WEIGHTS_DIFFER):
        check_graph_weights(open_artifact(art))  # on demand; loading is reading (hashes, signature)


@pytest.mark.parametrize("how", ["changed", "added"])
def test_a_structural_constant_the_builder_never_writes_is_refused(tmp_path, how):
    """Mutants: a numbered scalar (-inf of the mask) changed to -1e4, or a numbered float tensor
    added (where a weight could hide): the weights match, the message says the structure is not
    this builder's and to re-export."""
    art = _copy(OLD["decoder"], tmp_path / "art")
    model = onnx.load(str(art / "step.onnx"))
    if how == "changed":
        init = next(
            t
            for t in model.graph.initializer
            if is_numbered(t.name) and t.dims == [] and np.isneginf(numpy_helper.to_array(t))
        )
        init.CopyFrom(numpy_helper.from_array(np.asarray(-1e4, np.float32), init.name))
    else:
        model.graph.initializer.append(numpy_helper.from_array(np.ones(8, np.float32), "c_999"))
    _reseal_graph(art, model)
    with pytest.raises(ArtifactError, match=OTHER_BUILDER):
        check_graph_weights(open_artifact(art))  # on demand; loading is reading (hashes, signature)
