"""Anti-rollback: the signed manifest carries a monotonic release number; a device pins the lowest
it accepts (`runtime.load(..., trust=KEY, min_release=N)`, `--trust KEY --min-release N`), and an
older, genuinely signed artifact is refused in one line."""

from __future__ import annotations

import shutil

import pytest

from tickformer import runtime, signing
from tickformer.artifact.reader import open_artifact
from tickformer.cli import main
from tickformer.errors import ConfigError, ExportError, UntrustedArtifact
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset

CFG = preset("tiny")


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    root = tmp_path_factory.mktemp("releases")
    private, public = signing.generate_key(root / "key")
    for n in (100, 200):
        export_params(CFG, init_params(CFG, n), root / f"r{n}", sign=private, release=n)
    return root, public


def test_the_release_is_in_the_signed_manifest_and_defaults_to_the_export_time(releases, tmp_path):
    root, public = releases
    assert open_artifact(root / "r200", trust=public).manifest["release"] == 200
    export_params(CFG, init_params(CFG, 0), tmp_path / "now")
    assert open_artifact(tmp_path / "now").manifest["release"] > 1_700_000_000  # seconds since 1970
    with pytest.raises(ExportError, match="--release -1 must be a whole number >= 0"):
        export_params(CFG, init_params(CFG, 0), tmp_path / "bad", release=-1)


def test_an_older_signed_artifact_swapped_in_is_refused(releases, tmp_path):
    root, public = releases
    device = tmp_path / "model"
    shutil.copytree(root / "r200", device)
    with runtime.load(device, trust=public, min_release=150) as s:
        assert s.position == 0
    shutil.rmtree(device)
    shutil.copytree(root / "r100", device)  # the rollback: an older, genuinely signed artifact
    with runtime.load(device, trust=public) as s:  # without a pinned minimum it still loads
        assert s.position == 0
    with pytest.raises(
        UntrustedArtifact, match="release 100 is older than 150, the lowest this device accepts"
    ):
        runtime.load(device, trust=public, min_release=150)
    with pytest.raises(ConfigError, match="min_release needs trust="):
        runtime.load(device, min_release=150)


def test_the_cli_refuses_a_rollback_in_one_line(releases, capsys):
    root, public = releases
    assert main(["inspect", str(root / "r100"), "--trust", str(public), "--min-release", "150"]) != 0
    err = capsys.readouterr().err.strip()
    assert "release 100 is older than 150" in err and len(err.splitlines()) == 1, err
    assert main(["inspect", str(root / "r200"), "--trust", str(public), "--min-release", "150"]) == 0
    capsys.readouterr()
    assert main(["inspect", str(root / "r200"), "--min-release", "150"]) != 0
    assert "--min-release needs --trust" in capsys.readouterr().err
