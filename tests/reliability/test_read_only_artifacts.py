"""Issue 38: artifacts are read-only to the tools. Before, `codegen`, `verify` and `certify` with
`--out ART/sub` wrote into a signed artifact (which then refused to load at the next boot), and
`codegen ART --out ART --force` replaced the artifact with C sources. Now every command but export
(whose --out is the artifact it writes) refuses an --out inside an artifact, or equal to one, in
one line before it runs; sign and build write ART by purpose and take no --out.
"""

from __future__ import annotations

import hashlib
import os

import _relutil as ru
import pytest

from tickformer import runtime, signing
from tickformer.artifact.location import artifact_containing
from tickformer.artifact.signer import sign_artifact
from tickformer.cli import main

KIND = "attack: a command's --out inside an artifact, or replacing it"


def _tree(root):
    """{relative path: sha256} of every file under root."""
    return {
        os.path.relpath(os.path.join(d, f), root): hashlib.sha256(
            open(os.path.join(d, f), "rb").read()
        ).hexdigest()
        for d, _, files in os.walk(root)
        for f in files
    }


@pytest.fixture()
def signed_art(art_src, tmp_path):
    private, public = signing.generate_key(tmp_path / "key")
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    sign_artifact(art, private)
    return art, public


def _commands(art, tmp_path):
    return {
        "codegen into": ["codegen", str(art), "--out", str(art / "c")],
        "codegen replacing": ["codegen", str(art), "--out", str(art), "--force"],
        "verify into": ["verify", str(art), "--out", str(art / "v")],
        "certify into": ["certify", str(art), "--budget-us", "1000", "--out", str(art / "cert")],
        "export into": ["export", str(tmp_path / "ck"), "--out", str(art / "nested")],
        "keygen into": ["keygen", "--out", str(art / "key")],
        "log into": ["log", "tanks", "--out", str(art / "log.csv")],
        "train replacing": ["train", "--task", "copy", "--out", str(art)],
    }


@pytest.mark.parametrize(
    "case",
    [
        "codegen into",
        "codegen replacing",
        "verify into",
        "certify into",
        "export into",
        "keygen into",
        "log into",
        "train replacing",
    ],
)
def test_no_command_writes_into_an_artifact(signed_art, tmp_path, capsys, outcomes, case):
    art, public = signed_art
    before = _tree(art)
    argv = _commands(art, tmp_path)[case]
    outcomes.describe(KIND, "codegen/verify/certify/export/keygen/log/train; refused before running")
    code = main(argv)
    err = capsys.readouterr().err.strip()
    outcomes.record(KIND, "refused, one line" if code != 0 and "\n" not in err else f"UNEXPECTED exit {code}")
    assert code != 0, f"{case}: {argv} ran"
    assert len(err.splitlines()) == 1 and "artifact" in err and "--out" in err, err
    assert _tree(art) == before  # not a byte written, moved or removed
    with runtime.load(art, trust=public) as s:  # and it still loads at the next boot
        assert s.position == 0


def test_a_symlink_into_an_artifact_is_inside_it(signed_art, tmp_path):
    art, _ = signed_art
    os.symlink(art, tmp_path / "link")
    assert artifact_containing(tmp_path / "link" / "report") == art.resolve()
    assert artifact_containing(tmp_path / "elsewhere") is None
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "manifest.json").write_text('{"format": "something else"}')
    assert artifact_containing(tmp_path / "fake" / "out") is None


def test_export_may_replace_an_artifact_at_its_out(art_src, tmp_path, capsys):
    """Its purpose: --out is the artifact it writes."""
    from tickformer.model import init_params, preset
    from tickformer.model.checkpoint import save_checkpoint

    cfg = preset("tiny")
    save_checkpoint(tmp_path / "ck", cfg, init_params(cfg, 3))
    art = ru.fresh_copy(art_src[0], tmp_path / "art")
    assert main(["export", str(tmp_path / "ck"), "--out", str(art)]) == 0, capsys.readouterr().err
