"""One artifact id everywhere (issue 41): the manifest's manifest_sha256, the generated C header
and source, the library's tf_artifact_sha256(), the codegen README, the certificate of the Python
path and that of the native timing program (which checks the id its program reports) agree."""

from __future__ import annotations

import ctypes
import json
import re

from tickformer.artifact import open_artifact
from tickformer.cli import main
from tickformer.codegen import generate
from tickformer.codegen.plan import plan_for
from tickformer.codegen.toolchain import build_library


def test_one_artifact_id_in_the_manifest_the_c_header_and_the_certificate(arts, tmp_path, c_compiler):
    art = arts["tiny"]
    manifest_id = json.loads((art / "manifest.json").read_text())["manifest_sha256"]
    files = generate(art)
    header = files["tf_model.h"].decode()
    header_id = re.search(r"Artifact manifest_sha256 ([0-9a-f]{64})", header).group(1)
    source_id = re.search(
        r'tf_artifact_sha256\(void\)\s*\{\s*return "([0-9a-f]{64})"', files["tf_model.c"].decode()
    )
    readme_id = re.search(r"manifest_sha256 ([0-9a-f]{64})", files["README"].decode()).group(1)
    lib = ctypes.CDLL(str(build_library(plan_for(open_artifact(art)), cache_dir=tmp_path / "cache")))
    lib.tf_artifact_sha256.restype = ctypes.c_char_p
    out = tmp_path / "cert"
    args = ["certify", str(art), "--backend", "c", "--budget-us", "100000", "--samples", "1000"]
    main([*args, "--warmup", "10", "--n-boot", "20", "--out", str(out), "--quiet"])
    cert = json.loads((out / "certificate.json").read_text())
    main(
        [*args, "--native", "--warmup", "10", "--n-boot", "20", "--out", str(tmp_path / "native"), "--quiet"]
    )
    native = json.loads((tmp_path / "native" / "certificate.json").read_text())
    ids = {
        "manifest": manifest_id,
        "tf_model.h": header_id,
        "tf_model.c": source_id.group(1),
        "README": readme_id,
        "library": lib.tf_artifact_sha256().decode(),
        "certificate": cert["conditions"]["artifact_id"],
        "native certificate": native["conditions"]["artifact_id"],
    }
    assert len(set(ids.values())) == 1, ids
    # the Python path's certificate names the library it timed and its compiler and flags
    from tickformer.codegen.toolchain import compile_flags, find_compiler

    build = cert["conditions"]["c_library"]["build"]
    assert build["flags"] == list(compile_flags(find_compiler())) and build["compiler"]
