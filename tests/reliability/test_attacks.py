"""Issue 20: attacks by someone who can write a directory a user loads (an artifact or a
checkpoint), each reproduced with a timeout. Before the fix, several of these hung, read
outside the directory or loaded silently; each must now end in our error, fast.

What must hold: every file is opened once without following links (O_NOFOLLOW | O_NONBLOCK),
checked on its descriptor (regular, one hard link, size before reading) and hashed and parsed
from the same bytes (`tickformer.safe_files`); manifests parse strictly (`tickformer.sealed.loads`);
npz members are checked before decompression; graphs hold no unbounded control flow or custom
domain, and their tensors equal those built from weights.npz. Sessions (threads, signals) and
signatures have their own files: test_session_safety.py, test_signing.py.

Every case is recorded (`_relutil.OUTCOMES`) under a class "attack: ..." counted in
docs/reliability_report.md.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
import zipfile

import _relutil as ru
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tickformer import runtime, sealed
from tickformer.artifact.reader import open_artifact
from tickformer.errors import ArtifactError, CheckpointError
from tickformer.model.checkpoint import load_checkpoint

LINK_TARGETS = ["fifo", "/dev/zero", "identical copy outside"]


def _plant(root, name, target, tmp_path):
    """Replace root/name by `target`: a FIFO, or a symlink to a FIFO, /dev/zero or an identical copy."""
    original = (root / name).read_bytes()
    (root / name).unlink()
    if target == "fifo itself":
        os.mkfifo(root / name)
        return
    if target == "fifo":
        fifo = tmp_path / f"fifo-{name}"
        os.mkfifo(fifo)
        os.symlink(fifo, root / name)
    elif target == "/dev/zero":
        os.symlink("/dev/zero", root / name)
    else:
        outside = tmp_path / f"outside-{name}"
        outside.write_bytes(original)
        os.symlink(outside, root / name)


def _record(outcomes, kind, note, case, error):
    outcomes.describe(kind, note)
    with pytest.raises(error) as info:
        outcomes.run(kind, case, reraise=True)
    assert "\n" not in str(info.value)
    return str(info.value)


# --- links, FIFOs and devices in place of a file ------------------------------------------------
CKPT_LINKS = "attack: checkpoint file replaced by a FIFO or a symlink (FIFO, /dev/zero, copy outside)"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("target", ["fifo itself", *LINK_TARGETS])
@pytest.mark.parametrize("name", ["metrics.json", "weights.npz", "checkpoint.json"])
def test_checkpoint_file_replaced_by_a_link_or_fifo_is_refused_fast(
    ckpt_src, tmp_path, outcomes, name, target
):
    """Before: a symlink to a FIFO hung `tickformer export`, /dev/zero grew to gigabytes, an
    identical copy outside loaded (no re-sealing needed)."""
    ckpt = ru.fresh_copy(ckpt_src[0], tmp_path / "ckpt")
    _plant(ckpt, name, target, tmp_path)
    start = time.monotonic()
    message = _record(
        outcomes,
        CKPT_LINKS,
        "a listed file or the manifest of a checkpoint replaced by a FIFO, or by a symlink to a FIFO, to "
        "/dev/zero or to an identical copy outside; must be refused by name before any read, within seconds",
        lambda: load_checkpoint(ckpt),
        CheckpointError,
    )
    assert time.monotonic() - start < 20  # a hang is a timeout marker's; a VM stall is seconds
    assert name in message
    assert ("symbolic link" if target != "fifo itself" else "FIFO") in message


ART_LINKS = "attack: artifact file replaced by a FIFO or a symlink (FIFO, /dev/zero, copy outside)"
ART_LINKS_NOTE = (
    "manifest.json or a listed file replaced by a FIFO, a directory or a symlink (FIFO, /dev/zero, copy "
    "outside), or the artifact path a symlink; must be refused by name with what it is (not 'missing'), fast"
)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("target", ["fifo itself", *LINK_TARGETS])
@pytest.mark.parametrize("name", ["manifest.json", "weights.npz", "step.onnx"])
def test_artifact_file_replaced_by_a_link_or_fifo_is_refused_fast(art_src, tmp_path, outcomes, name, target):
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    _plant(art, name, target, tmp_path)
    message = _record(
        outcomes, ART_LINKS, ART_LINKS_NOTE, lambda: runtime.load(art, backend="ort"), ArtifactError
    )
    assert name in message and "missing" not in message and "no manifest.json" not in message
    assert ("symbolic link" if target != "fifo itself" else "FIFO") in message


@pytest.mark.timeout(30)
@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_listed_name_that_is_a_directory_or_fifo_is_named_as_such(
    art_src, ckpt_src, tmp_path, outcomes, kind
):
    """Before: reported as 'missing'."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    (art / "weights.npz").unlink()
    (art / "weights.npz").mkdir() if kind == "directory" else os.mkfifo(art / "weights.npz")
    message = _record(outcomes, ART_LINKS, ART_LINKS_NOTE, lambda: open_artifact(art), ArtifactError)
    assert ("a directory" if kind == "directory" else "a FIFO") in message and "missing" not in message


@pytest.mark.timeout(30)
def test_hard_link_to_a_file_outside_is_refused(art_src, ckpt_src, tmp_path, outcomes):
    """A hard link is the same file under another name, which the attacker can change later."""
    kind = "attack: listed file hard-linked to a file outside"
    outcomes.describe(
        kind, "weights.npz replaced by a hard link to an identical file outside; refused (st_nlink 2)"
    )
    for src, manifest, loader, error in (
        (art_src[0], ru.ART_MANIFEST, open_artifact, ArtifactError),
        (ckpt_src[0], ru.CKPT_MANIFEST, load_checkpoint, CheckpointError),
    ):
        root = ru.fresh_copy(src, tmp_path / manifest)
        outside = tmp_path / f"outside-{manifest}.npz"
        os.replace(root / "weights.npz", outside)
        os.link(outside, root / "weights.npz")
        with pytest.raises(error, match="weights.npz has 2 hard links"):
            outcomes.run(kind, lambda root=root, loader=loader: loader(root), reraise=True)


@pytest.mark.timeout(30)
def test_an_artifact_path_that_is_a_symlink_is_refused_with_its_target(art_src, tmp_path, outcomes):
    link = tmp_path / "link"
    os.symlink(art_src[0], link)
    message = _record(outcomes, ART_LINKS, ART_LINKS_NOTE, lambda: open_artifact(link), ArtifactError)
    assert "symbolic link" in message and str(art_src[0]) in message


@pytest.mark.timeout(30)
def test_unreadable_file_gives_one_line(art_src, ckpt_src, tmp_path, outcomes, monkeypatch):
    """chmod 000 (simulated: the tests run as root, who reads anything): EACCES on open."""
    kind = "attack: listed file unreadable (chmod 000, EACCES)"
    outcomes.describe(kind, "os.open of weights.npz fails with EACCES; must be one line naming the file")
    real_open = os.open

    def denied(path, flags, *args, **kwargs):
        if str(path).endswith("weights.npz"):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    for root, loader, error in (
        (art_src[0], open_artifact, ArtifactError),
        (ckpt_src[0], load_checkpoint, CheckpointError),
    ):
        with pytest.raises(error, match="weights.npz cannot be read \\(Permission denied\\)"):
            outcomes.run(kind, lambda root=root, loader=loader: loader(root), reraise=True)


# --- time of check, time of use ----------------------------------------------------------------------
TOCTOU = "attack: file swapped after the hash check (FIFO, /dev/zero, outside), time of use"


@pytest.mark.timeout(30)
@pytest.mark.parametrize("target", LINK_TARGETS)
def test_weights_swapped_after_open_are_never_read(art_src, tmp_path, outcomes, target):
    """Before: Artifact.params() re-opened weights.npz by path and read whatever was there.
    Now the bytes verified at open are the ones parsed; nothing is opened again."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    artifact = open_artifact(art)
    _plant(art, "weights.npz", target, tmp_path)
    outcomes.describe(
        TOCTOU,
        "weights.npz or step.onnx swapped for a link after open_artifact; the backends "
        "must use the verified bytes (success, same output) without touching the file",
    )
    outcomes.run(TOCTOU, lambda: artifact.params())
    params = artifact.params()
    np.testing.assert_array_equal(params["in_proj.w"], art_src[1]["in_proj.w"])
    session = runtime.Session(artifact, runtime.backend_class("numpy")(artifact))
    session.step(np.zeros(session.input_shape, np.float32))


@pytest.mark.timeout(60)
def test_a_racing_swap_never_hangs_or_loads_other_bytes(art_src, tmp_path, outcomes):
    """A thread swaps weights.npz between the real file and a symlink to a FIFO as fast as it can
    while the main thread loads in a loop. Before, one load in three hung. Every load must end in
    success with the real weights or in ArtifactError, each within a second."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    real = tmp_path / "real.npz"
    real.write_bytes((art / "weights.npz").read_bytes())
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    stop = threading.Event()

    data = real.read_bytes()

    def swapper():
        i = 0
        while not stop.is_set():
            tmp = art / f".swap{i % 2}.tmp"
            try:
                if i % 2:
                    os.symlink(fifo, tmp)
                else:
                    tmp.write_bytes(data)
                os.replace(tmp, art / "weights.npz")
            except OSError:
                pass
            i += 1

    kind = "attack: weights.npz swapped with a FIFO link by a racing thread, load in a loop"
    outcomes.describe(
        kind,
        "a thread swaps weights.npz between a copy of the real file and a symlink to a FIFO; "
        "each load: success with the real weights, or ArtifactError; never a hang",
    )
    thread = threading.Thread(target=swapper, daemon=True)
    thread.start()
    try:
        for _ in range(60):
            start = time.monotonic()
            outcome = outcomes.run(kind, lambda: open_artifact(art))
            assert time.monotonic() - start < 20, outcome  # a hang, not a VM stall
    finally:
        stop.set()
        thread.join(5)
    assert sum(outcomes.counts[kind].values()) >= 60


# --- commands that read outside the loader --------------------------------------------------------------
COMMANDS = "attack: a command reads a hostile artifact (check, verify)"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ["fifo extra.onnx", "symlink graph", "tampered graph"])
def test_check_reads_only_through_the_loader(art_src, tmp_path, outcomes, monkeypatch, case):
    """Before: `tickformer check` globbed *.onnx and parsed each by path: a FIFO hung it, a
    symlink read outside, a tampered graph was parsed unhashed."""
    from tickformer.export.trt_support import check_path, target

    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    if case == "fifo extra.onnx":
        os.mkfifo(art / "extra.onnx")
    elif case == "symlink graph":
        _plant(art, "model.onnx", "identical copy outside", tmp_path)
    else:
        data = bytearray((art / "step.onnx").read_bytes())
        data[len(data) // 2] ^= 1
        (art / "step.onnx").write_bytes(bytes(data))

        def forbidden(*a, **k):
            raise AssertionError("a graph was parsed before its hash was checked")

        for name in ("load", "load_model", "load_from_string", "load_model_from_string"):
            monkeypatch.setattr(onnx, name, forbidden)
    words = {
        "fifo extra.onnx": "extra.onnx",
        "symlink graph": "model.onnx is a symbolic link",
        "tampered graph": "step.onnx: SHA-256",
    }[case]
    outcomes.describe(
        COMMANDS,
        "check with a FIFO extra.onnx / a symlinked or tampered graph; verify with a FIFO "
        "or deeply nested manifest.json: ArtifactError before any parse, never a hang",
    )
    with pytest.raises(ArtifactError, match=words):
        outcomes.run(COMMANDS, lambda: check_path(art, target("trt-10.3")), reraise=True)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", ["fifo", "nested 100000 deep", "duplicate keys"])
def test_verify_reads_the_manifest_only_through_the_loader(art_src, tmp_path, outcomes, case):
    from tickformer.verify.properties import open_model

    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    if case == "fifo":
        (art / "manifest.json").unlink()
        os.mkfifo(art / "manifest.json")
    elif case == "nested 100000 deep":
        (art / "manifest.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    else:
        text = (art / "manifest.json").read_text()
        (art / "manifest.json").write_text(text.replace('"batch": 1', '"batch": 1, "batch": 1', 1))
    words = {
        "fifo": "FIFO",
        "nested 100000 deep": "nested deeper",
        "duplicate keys": "duplicate key 'batch'",
    }[case]
    with pytest.raises(ArtifactError, match=words):
        outcomes.run(COMMANDS, lambda: open_model(art, "ort", 4), reraise=True)


# --- the manifest parser -----------------------------------------------------------------------------
@pytest.mark.timeout(30)
def test_duplicate_keys_are_refused_even_resealed(art_src, tmp_path, outcomes):
    """Before: last one wins. A manifest could show a first-wins reader the domain [-1, 1] and the
    runtime [-1000, 1000]; resealed over the last-wins reading, the self-hash matched."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    manifest = ru.read_json(art / ru.ART_MANIFEST)
    manifest["input_domain"] = [-1000.0, 1000.0]
    body = json.dumps(sealed.seal(manifest), indent=2, sort_keys=True)
    body = body.replace('"input_domain": [', '"input_domain": [-1.0, 1.0], "input_domain": [', 1)
    (art / ru.ART_MANIFEST).write_text(body)
    kind = "attack: manifest with duplicate keys (resealed over the last value)"
    message = _record(
        outcomes,
        kind,
        "input_domain given twice, the self-hash recomputed over the last-wins "
        "reading; must be refused by the parser",
        lambda: open_artifact(art),
        ArtifactError,
    )
    assert "duplicate key 'input_domain'" in message


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "text, words",
    [
        (b"[" * 40 + b"]" * 40, "nested deeper than 32"),
        (b'{"a": NaN}', "NaN"),
        (b'{"a": -Infinity}', "Infinity"),
        (b'{"a": 1e400}', "overflows"),
        (b'{"a": 1, "a": 1}', "duplicate key"),
    ],
)
def test_strict_manifest_parser(text, words):
    with pytest.raises(ValueError, match=words):
        sealed.loads(text)


# --- npz members before decompression -------------------------------------------------------------------
def _npz_with_member(params, name, size, *, first=False):
    """weights.npz (np.savez layout) plus one member `name` of `size` zero bytes, deflated, streamed."""
    buffer = io.BytesIO()
    np.savez(buffer, **params)
    with zipfile.ZipFile(buffer, "a", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        with archive.open(name, "w", force_zip64=True) as member:
            chunk = bytes(1 << 20)
            for _ in range(size >> 20):
                member.write(chunk)
    return buffer.getvalue()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("member", ["evil.npy", "in_proj.w.npy"])
def test_npz_member_is_checked_by_name_and_size_before_decompression(
    art_src, tmp_path, outcomes, monkeypatch, member
):
    """Before: a member was decompressed (512 MiB) before its name was checked. Now the zip
    directory is read first; nothing is decompressed (ZipFile.open is a trap)."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    params = dict(art_src[1])
    if member != "evil.npy":
        del params["in_proj.w"]  # the real name, declaring 512 MiB instead of its 24 floats
    (art / "weights.npz").write_bytes(_npz_with_member(params, member, 512 << 20))
    ru.rehash(art, ru.ART_MANIFEST, ["weights.npz"])

    def trap(*args, **kwargs):
        raise AssertionError("a member was decompressed before the archive was checked")

    monkeypatch.setattr(zipfile.ZipFile, "open", trap)
    kind = "attack: weights.npz member of 512 MiB (unknown name, or a parameter's name), hash recomputed"
    message = _record(
        outcomes,
        kind,
        "a deflated member of 512 MiB of zeros; refused from the zip directory (name, "
        "declared size) before anything is decompressed",
        lambda: open_artifact(art),
        ArtifactError,
    )
    assert (
        "unexpected parameters ['evil']" if member == "evil.npy" else "declares 536870912 bytes"
    ) in message


@pytest.mark.timeout(60)
def test_npy_header_declaring_a_huge_shape_is_refused_before_np_load_allocates_it(art_src, tmp_path):
    """Found by test_fuzz_loaders (CI killed at 24 GiB): np.load allocates the shape an .npy header
    declares before it reads the data, and a member of a few bytes may declare any shape. Every
    header must now declare its parameter's shape, float32, C order, before np.load runs."""
    from numpy.lib import format as npy

    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    params = dict(art_src[1])
    header = io.BytesIO()
    npy.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (1 << 28,)})
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, value in params.items():
            if name == "in_proj.w":  # 1 GiB declared in a member of a few dozen bytes
                archive.writestr(name + ".npy", header.getvalue() + bytes(16))
            else:
                member = io.BytesIO()
                np.save(member, value)
                archive.writestr(name + ".npy", member.getvalue())
    (art / "weights.npz").write_bytes(buffer.getvalue())
    ru.rehash(art, ru.ART_MANIFEST, ["weights.npz"])
    with pytest.raises(
        ArtifactError, match=r"'in_proj.w' has shape \(268435456,\), config expects .*refused before loading"
    ):
        open_artifact(art)


@pytest.mark.timeout(30)
def test_a_foreign_file_as_weights_is_named_not_pickled(art_src, tmp_path):
    """Before: np.load's fallback said "pickled data" for any non-npy file."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    (art / "weights.npz").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(100))
    ru.rehash(art, ru.ART_MANIFEST, ["weights.npz"])
    with pytest.raises(ArtifactError, match="not an .npz archive") as info:
        open_artifact(art)
    assert "pickle" not in str(info.value)


def _zip_version_needed(data: bytes, version: int) -> bytes:
    """An archive whose central directory says every member needs zip `version` to extract."""
    out, at = bytearray(data), data.find(b"PK\x01\x02")
    while at >= 0:
        out[at + 6 : at + 8] = version.to_bytes(2, "little")
        at = data.find(b"PK\x01\x02", at + 4)
    return bytes(out)


@pytest.mark.timeout(30)
def test_weights_needing_a_zip_version_zipfile_lacks_are_refused_by_name(ckpt_src, art_src, tmp_path):
    """Found by the checkpoint fuzz (CI, 2026-12-05): zipfile raised NotImplementedError("zip file
    version 25.0"), which the loader did not turn into its own error. Before: that traceback."""
    for src, manifest, load, error in (
        (ckpt_src[0], ru.CKPT_MANIFEST, load_checkpoint, CheckpointError),
        (art_src[0], ru.ART_MANIFEST, open_artifact, ArtifactError),
    ):
        root = ru.fresh_copy(src, tmp_path / src.name)
        weights = root / "weights.npz"
        weights.write_bytes(_zip_version_needed(weights.read_bytes(), 250))
        ru.rehash(root, manifest, ["weights.npz"])
        with pytest.raises(error, match=r"not a readable .npz archive \(zip file version 25.0\)"):
            load(root)


# --- bounded work and consistent weights ----------------------------------------------------------------
def _reseal_graph(art, model, name="step.onnx"):
    (art / name).write_bytes(model.SerializeToString())
    ru.rehash(art, ru.ART_MANIFEST, [name])


def _loop_forever(model):
    """step.onnx whose output y passes through a Loop of 2^62 iterations (identity body)."""
    graph = model.graph
    out = graph.output[0].name
    for node in graph.node:
        node.output[:] = [f"{out}_pre" if o == out else o for o in node.output]
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["v_in"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, None),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, None),
        ],
    )
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array(1 << 62, np.int64), "trip"),
            numpy_helper.from_array(np.array(True), "go"),
        ]
    )
    graph.node.append(
        helper.make_node("Loop", ["trip", "go", f"{out}_pre"], [out], body=body, name="forever")
    )
    return model


def _custom_domain(model):
    model.graph.node[0].domain = "com.evil"
    model.opset_import.append(helper.make_opsetid("com.evil", 1))
    return model


def _if_node(model):
    graph = model.graph
    out = graph.output[0].name
    for node in graph.node:
        node.output[:] = [f"{out}_pre" if o == out else o for o in node.output]
    branch = helper.make_graph(
        [helper.make_node("Identity", [f"{out}_pre"], ["b"])],
        "branch",
        [],
        [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)],
    )
    graph.initializer.append(numpy_helper.from_array(np.array(True), "flag"))
    graph.node.append(
        helper.make_node("If", ["flag"], [out], then_branch=branch, else_branch=branch, name="iff")
    )
    return model


UNBOUNDED = {
    "Loop of 2^62 iterations": (_loop_forever, "'forever' \\(Loop\\) is control flow"),
    "If": (_if_node, "'iff' \\(If\\) is control flow"),
    "custom domain": (_custom_domain, "domain 'com.evil'"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(UNBOUNDED))
def test_unbounded_or_custom_graph_is_refused_at_load(art_src, tmp_path, worker, outcomes, case):
    """Before: a re-sealed step.onnx with a Loop of 2^62 iterations loaded and its step never
    returned. In a child process, so a hang would be seen as one (HANG)."""
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    make, words = UNBOUNDED[case]
    _reseal_graph(art, make(onnx.load(str(art / "step.onnx"))))
    kind = "attack: re-sealed step.onnx with a Loop of 2^62 iterations / If / custom domain, load(ort) in a child"
    outcomes.describe(
        kind, "hashes recomputed; must be refused at load (bounded work, standard operators), never a hang"
    )
    start = time.perf_counter_ns()
    reply = worker.load(art, "ort")
    outcomes.record(kind, reply["outcome"], (time.perf_counter_ns() - start) / 1e9)
    assert reply["outcome"] == "ArtifactError", reply
    with pytest.raises(ArtifactError, match=words):
        open_artifact(art)


@pytest.mark.timeout(30)
def test_control_flow_allowlist_is_per_kind_and_needs_a_static_trip_count():
    """The one-line extension for a recurrent kind (format.CONTROL_FLOW): Scan allowed there,
    with scan inputs of static length or the symbolic length of a graph input (the caller's
    array: work linear in it); a scan over a value computed in the graph is refused (its length
    could come from anything, e.g. a Tile by a constant); a Loop needs a constant M."""
    from tickformer.artifact import graph_rules

    body = helper.make_graph(
        [
            helper.make_node("Add", ["s_in", "x_t"], ["s_out"]),
            helper.make_node("Identity", ["s_out"], ["y_t"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("x_t", TensorProto.FLOAT, [2]),
        ],
        [
            helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2]),
            helper.make_tensor_value_info("y_t", TensorProto.FLOAT, [2]),
        ],
    )

    def scan_model(length, computed=False):
        nodes = [
            helper.make_node(
                "Scan",
                ["s0", "x2" if computed else "x"],
                ["s", "y"],
                body=body,
                num_scan_inputs=1,
                name="rec",
            )
        ]
        if computed:  # an Identity here; a Tile by a constant would give the scan any length
            nodes.insert(0, helper.make_node("Identity", ["x"], ["x2"]))
        graph = helper.make_graph(
            nodes,
            "g",
            [
                helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2]),
                helper.make_tensor_value_info("x", TensorProto.FLOAT, [length, 2]),
            ],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [length, 2])],
        )
        return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

    rules = dict(max_trip=16, where="model.onnx", what="a recurrent artifact's model graph")
    graph_rules.check_graph(
        scan_model("T"), allowed=frozenset({"Scan"}), **rules
    )  # symbolic: the length of the caller's input
    graph_rules.check_graph(scan_model(16), allowed=frozenset({"Scan"}), **rules)
    with pytest.raises(ArtifactError, match="scan length 17 is outside 1..16"):
        graph_rules.check_graph(scan_model(17), allowed=frozenset({"Scan"}), **rules)
    with pytest.raises(ArtifactError, match="control flow"):
        graph_rules.check_graph(scan_model("T"), allowed=frozenset(), **rules)
    with pytest.raises(ArtifactError, match="computed inside the graph"):
        graph_rules.check_graph(scan_model("T", computed=True), allowed=frozenset({"Scan"}), **rules)
    from tickformer.artifact.format import CONTROL_FLOW, allowed_control_flow

    assert (
        set(CONTROL_FLOW) == {"decoder", "encoder-decoder", "windowed", "ssm"}
        and allowed_control_flow("decoder", "step") == set()
        and allowed_control_flow("windowed", "step") == set()
    )


WEIGHTS = "attack: re-sealed graph whose tensors differ from weights.npz"


def _other_weights_graph(art, tensor):
    """step.onnx of `art` with one tensor changed (a parameter, a folded bias), added, or its
    name made not UTF-8; the file rewritten, the manifest NOT resealed."""
    if tensor == "a name not UTF-8":
        data = (art / "step.onnx").read_bytes()
        at = data.rindex(b"in_proj.w")  # the initializer's name: initializers serialize after nodes
        data = data[:at] + b"i\x80\x8dproj.w" + data[at + len(b"in_proj.w") :]
        (art / "step.onnx").write_bytes(data)
        assert any(isinstance(t.name, bytes) for t in onnx.load_model_from_string(data).graph.initializer)
        return
    model = onnx.load(str(art / "step.onnx"))
    inits = {t.name: t for t in model.graph.initializer}
    if tensor == "an added initializer":
        model.graph.initializer.append(numpy_helper.from_array(np.ones(4, np.float32), "extra"))
    else:
        name = "in_proj.w" if "in_proj" in tensor else next(n for n in inits if n.endswith("_step"))
        value = numpy_helper.to_array(inits[name]).copy()
        value.flat[0] += 1.0
        inits[name].CopyFrom(numpy_helper.from_array(value, name))
    (art / "step.onnx").write_bytes(model.SerializeToString())


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "tensor",
    ["a parameter (in_proj.w)", "a folded bias (*_step)", "an added initializer", "a name not UTF-8"],
)
def test_graph_weights_that_differ_from_weights_npz_are_refused(art_src, tmp_path, outcomes, tensor):
    """Loading is reading: consistency of graphs and weights is established when the artifact is
    written (export/consistency.py, run by the writer before it seals) and sealed by its hashes
    and signature. A graph changed afterwards is refused by its hash; re-hashed and re-sealed
    (what anyone can do), by the signature when the loader asks for one (trust=); and the
    on-demand check (`tickformer inspect ART --graphs`) still finds the tensors that differ.
    Before: runtime.load(ort) rebuilt every graph from weights.npz at every load; a tensor name
    that is not UTF-8 (protobuf returns it as bytes) raised TypeError there (a CI fuzz find)."""
    from tickformer import signing
    from tickformer.artifact.signer import sign_artifact
    from tickformer.errors import UntrustedArtifact
    from tickformer.export.consistency import check_graph_weights

    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    private, public = signing.generate_key(tmp_path / "key")
    sign_artifact(art, private)
    _other_weights_graph(art, tensor)
    with pytest.raises(ArtifactError, match="step.onnx"):  # not re-hashed: its sha256 differs
        runtime.load(art, backend="ort")
    ru.rehash(art, ru.ART_MANIFEST, ["step.onnx"])  # re-sealed: the old signature no longer matches
    outcomes.describe(
        WEIGHTS,
        "one tensor of step.onnx changed (a parameter, a folded bias) or added, hashes recomputed and "
        "the manifest re-sealed; runtime.load(ort, trust=the signer's key) must refuse (the signature)",
    )
    with pytest.raises(UntrustedArtifact):
        outcomes.run(WEIGHTS, lambda: runtime.load(art, backend="ort", trust=public), reraise=True)
    with pytest.raises(ArtifactError, match="differ from the graph export builds from weights.npz"):
        check_graph_weights(open_artifact(art))  # on demand: the graphs rebuilt from weights.npz
    from tickformer.cli import main

    assert main(["inspect", str(art), "--graphs"]) == 1  # the same, from the command line, in one line
    assert main(["inspect", str(art_src[0]), "--graphs"]) == 0


def test_export_refuses_to_seal_graphs_that_do_not_carry_its_weights(art_src, tmp_path, monkeypatch):
    """The writer checks what it is about to write (export/writer.py check_consistent): weights.npz
    bytes that are not the weights the graphs were built from (a planted exporter bug) are refused
    before anything is sealed, in one line, and the previous artifact stays."""
    from tickformer.errors import ExportError
    from tickformer.export import writer
    from tickformer.model import preset

    real = writer._weights_bytes

    def other_weights(params, cfg):
        return real({k: (v + 1.0 if k == "in_proj.w" else v) for k, v in params.items()}, cfg)

    monkeypatch.setattr(writer, "_weights_bytes", other_weights)
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    before = (art / ru.ART_MANIFEST).read_bytes()
    with pytest.raises(
        ExportError, match="did not seal .*in_proj.w.* differ from the graph export builds"
    ) as info:
        writer.export_params(preset("tiny"), art_src[1], art, lengths=[1])
    assert "\n" not in str(info.value)
    assert (art / ru.ART_MANIFEST).read_bytes() == before


# --- writes that fail --------------------------------------------------------------------------------------
WRITES = "attack: export / certify into a full disk or past the file-size limit (child process)"

_WRITE_DRIVER = r"""
import contextlib, io, json, resource, sys
limit, argv = int(sys.argv[1]), json.loads(sys.argv[2])
if limit:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))  # Python ignores SIGXFSZ: writes get EFBIG
else:  # a full disk: ext4 with delayed allocation reports ENOSPC at fsync, which every durable write does
    import errno, os
    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    os.fsync = full
from tickformer.cli import main
err = io.StringIO()
with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    rc = main(argv)
print(json.dumps([rc, err.getvalue()]))
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("limit", [0, 20_000], ids=["disk full (ENOSPC)", "file-size limit (EFBIG)"])
def test_export_into_a_full_disk_keeps_the_previous_artifact_and_says_so(
    ckpt_src, art_src, tmp_path, outcomes, limit
):
    import subprocess
    import sys

    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    before = {p.name: p.read_bytes() for p in art.iterdir()}
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            _WRITE_DRIVER,
            str(limit),
            json.dumps(["export", str(ckpt_src[0]), "--out", str(art)]),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    rc, err = json.loads(proc.stdout.strip().splitlines()[-1])
    lines = [line for line in err.splitlines() if line.strip()]
    outcomes.describe(
        WRITES,
        "tickformer export over an existing artifact, and certify, with ENOSPC on every write "
        "or RLIMIT_FSIZE 20 kB: one line naming the cause and that the previous version is intact",
    )
    outcomes.record(
        WRITES, "one line, exit 1" if rc == 1 and len(lines) == 1 else f"exit {rc}, {len(lines)} lines"
    )
    assert rc == 1 and len(lines) == 1 and "Traceback" not in err, err
    assert ("No space left" if not limit else "File too large") in lines[0] and "intact" in lines[0]
    assert {p.name: p.read_bytes() for p in art.iterdir()} == before
    open_artifact(art)


@pytest.mark.timeout(300)
def test_certify_into_a_full_disk_is_one_line(art_src, tmp_path, outcomes):
    """The report writer removes a stale certificate first (certify/report.py), then writes each
    file atomically: a full disk leaves no certificate, never a half one."""
    import subprocess
    import sys

    out = tmp_path / "cert"
    argv = [
        "certify",
        str(art_src[0]),
        "--budget-us",
        "100000",
        "--samples",
        "1000",
        "--warmup",
        "10",
        "--n-boot",
        "20",
        "--quiet",
        "--out",
        str(out),
    ]
    proc = subprocess.run(
        [sys.executable, "-c", _WRITE_DRIVER, "0", json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    rc, err = json.loads(proc.stdout.strip().splitlines()[-1])
    lines = [line for line in err.splitlines() if line.strip()]
    outcomes.record(
        WRITES, "one line, exit 1" if rc == 1 and len(lines) == 1 else f"exit {rc}, {len(lines)} lines"
    )
    assert rc == 1 and len(lines) == 1 and "No space left" in lines[0], err
    assert not (out / "certificate.json").exists()


# --- the CLI's own writes into an artifact -----------------------------------------------------------------
@pytest.mark.timeout(60)
def test_run_output_into_the_artifact_is_refused_and_the_artifact_still_loads(art_src, tmp_path):
    """Before: `run --output ART/out.npy` wrote there, and the artifact then failed to load as
    'unlisted files ... re-export it'. Now refused; and an unlisted file's message says remove it."""
    from tickformer.cli import main

    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    np.save(tmp_path / "in.npy", np.zeros((4, 3), np.float32))
    assert main(["run", str(art), "--input", str(tmp_path / "in.npy"), "--output", str(art / "out.npy")]) == 1
    assert not (art / "out.npy").exists()
    open_artifact(art)
    (art / "stray.npy").write_bytes(b"x")
    with pytest.raises(ArtifactError, match=r"unlisted files \['stray.npy'\].*remove them"):
        open_artifact(art)


@pytest.mark.timeout(60)
def test_inspect_prints_a_resealed_manifest_that_lacks_display_fields(art_src, tmp_path, capsys):
    """Before: KeyError traceback for a manifest without opset / equivalence / versions."""
    from tickformer.cli import main

    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    manifest = ru.read_json(art / ru.ART_MANIFEST)
    for key in ("opset", "equivalence", "versions", "created_utc"):
        manifest.pop(key)
    manifest["tolerance"].pop("reason")
    ru.write_json(art / ru.ART_MANIFEST, ru.resealed(manifest))
    assert main(["inspect", str(art)]) == 0
    assert "opset ?" in capsys.readouterr().out
