"""Every number of an artifact's manifest has a range checked at load, signed or not
(artifact/ranges.py): a walk over every numeric field of every artifact kind puts each one out of
its range, re-seals, and must see one line naming that field, its value and the range."""

from __future__ import annotations

import fnmatch
import json
import re

import _relutil as ru
import pytest

from tickformer.artifact import ranges
from tickformer.artifact.reader import open_artifact
from tickformer.errors import ArtifactError
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset

KINDS = {
    "decoder": preset("tiny"),
    "windowed": preset("tiny").replace(window=4),
    "ssm": preset("tiny").replace(block="ssm", d_state=4),
    "seq2seq": preset("tiny-seq2seq"),
}


@pytest.fixture(scope="module")
def arts(tmp_path_factory):
    root = tmp_path_factory.mktemp("kinds")
    for name, cfg in KINDS.items():
        export_params(cfg, init_params(cfg, 0), root / name, batch=2)
    return {name: root / name for name in KINDS}


def _out_of_range(lo: float, hi: float) -> float:
    """A JSON number outside [lo, hi] (above it where it can be, else below)."""
    if hi < ranges.F32_MAX:
        return hi * 2 + 1 if hi > 0 else 1.0
    return 1e39  # beyond float32: still a finite JSON number


def _leaves_with_keys(value, path="", keys=()):
    """(dotted path as ranges.leaves writes it, the concrete keys and indices to reach the leaf)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves_with_keys(v, f"{path}.{k}" if path else str(k), (*keys, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves_with_keys(v, f"{path}.*" if path else "*", (*keys, i))
    else:
        yield path, keys, value


def _set(doc, keys, value):
    for k in keys[:-1]:
        doc = doc[k]
    doc[keys[-1]] = value


def test_every_numeric_field_of_every_kind_has_a_range_or_is_a_record(arts):
    """A new field added to the format fails here until it is given a range (or declared a
    record no code reads)."""
    for name, art in arts.items():
        manifest = ru.read_json(art / ru.ART_MANIFEST)
        assert ranges.problems(manifest) == [], name
        for path, value in ranges.leaves(manifest):
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                record = any(fnmatch.fnmatchcase(path, p) for p in ranges.RECORDS)
                assert record or ranges.range_of(path) is not None, (name, path)


@pytest.mark.parametrize("kind", list(KINDS))
def test_each_field_out_of_range_is_refused_with_its_name_value_and_range(arts, kind, tmp_path):
    manifest = ru.read_json(arts[kind] / ru.ART_MANIFEST)
    seen = set()
    for path, keys, value in _leaves_with_keys(manifest):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or path in seen:
            continue
        rng = ranges.range_of(path)
        if rng is None:
            continue
        seen.add(path)
        lo, hi, _ = rng
        bad = _out_of_range(lo, hi)
        root = ru.fresh_copy(arts[kind], tmp_path / path.replace("*", "x").replace(":", "_"))
        doc = ru.read_json(root / ru.ART_MANIFEST)
        _set(doc, keys, bad)
        ru.write_json(root / ru.ART_MANIFEST, ru.resealed(doc, manifest))
        with pytest.raises(ArtifactError) as exc:
            open_artifact(root)
        text = str(exc.value)
        # the format version has its own refusal, which names the versions this tickformer reads
        want = f"version {bad!r} is not supported" if path == "version" else f"{path} = {bad!r} is outside"
        assert want in text and "\n" not in text, (path, text)
        if path != "version":
            assert f"[{lo:g}, {hi:g}]" in text, text
    assert len(seen) >= 12, sorted(seen)


def test_the_attacks_of_the_report_are_refused_signed_or_not(arts, tmp_path):
    """ln_eps = 1e30 and output_bound = 1e-300 loaded before (re-sealed: no trust key needed); a
    signature does not make them sane: refused with the key too."""
    from tickformer import sealed, signing
    from tickformer.artifact.format import SIGNATURE

    key = tmp_path / "k"
    private, public = signing.generate_key(key)
    signer = signing.load_private_key(private)
    for field, value, where in (("ln_eps", 1e30, "config"), ("output_bound", 1e-300, None)):
        root = ru.fresh_copy(arts["decoder"], tmp_path / field)
        doc = ru.read_json(root / ru.ART_MANIFEST)
        (doc[where] if where else doc)[field] = value
        ru.write_json(
            root / ru.ART_MANIFEST, ru.resealed(doc, ru.read_json(arts["decoder"] / ru.ART_MANIFEST))
        )
        with pytest.raises(ArtifactError, match=re.escape(f"{field} = {value!r} is outside")):
            open_artifact(root)
        # a valid signature over the bad manifest (made by hand: `tickformer sign` refuses it)
        signed = sealed.canonical(ru.read_json(root / ru.ART_MANIFEST))
        (root / SIGNATURE).write_bytes(signing.signature_document(signed, signer))
        with pytest.raises(ArtifactError, match=re.escape(f"{field} = {value!r} is outside")):
            open_artifact(root, trust=public)


def test_caches_over_the_memory_budget_are_refused_before_allocating(arts, tmp_path):
    manifest = ru.read_json(arts["decoder"] / ru.ART_MANIFEST)
    doc = dict(manifest, batch=4096, max_len=1 << 20)
    assert any("needs" in p and "over the budget" in p for p in ranges.problems(doc))
    assert ranges.size_problems(manifest) == []


@pytest.mark.parametrize("field", ["n_layers", "n_enc_layers", "d_model"])
@pytest.mark.parametrize("value", [{"x": 3}, [3], "3"], ids=["dict", "list", "str"])
def test_a_size_of_the_wrong_type_is_named_not_a_type_error(arts, tmp_path, field, value):
    """The fuzz found it: config.n_layers = {..} reached the size check's sum (TypeError)."""
    root = ru.fresh_copy(arts["seq2seq"], tmp_path / "art")
    manifest = ru.read_json(root / ru.ART_MANIFEST)
    doc = json.loads(json.dumps(manifest))
    doc["config"][field] = value
    ru.write_json(root / ru.ART_MANIFEST, ru.resealed(doc, manifest))
    with pytest.raises(ArtifactError, match=field):
        open_artifact(root)


EXPORT_BOUNDS = "attack: export asked for an impossible batch, caches over the budget, or a NaN weight"


def test_export_refuses_what_no_session_could_load_before_building(tmp_path, monkeypatch, capsys, outcomes):
    """Before: `export --batch 1000000` was killed by the kernel (out of memory) and export_params
    with a NaN weight blamed the input domain (or raised LinAlgError). Now one line each, before
    any graph is built."""
    import numpy as np

    from tickformer.cli import main
    from tickformer.errors import ExportError
    from tickformer.model.checkpoint import save_checkpoint

    cfg = preset("tiny")
    params = init_params(cfg, 0)
    save_checkpoint(tmp_path / "ck", cfg, params)
    outcomes.describe(EXPORT_BOUNDS, "refused in one line before any graph is built")
    assert main(["export", str(tmp_path / "ck"), "--out", str(tmp_path / "a"), "--batch", "1000000"]) == 1
    err = capsys.readouterr().err.strip()
    assert "--batch 1000000 must be an integer in 1..4096" in err and len(err.splitlines()) == 1
    outcomes.record(EXPORT_BOUNDS, "ExportError")
    monkeypatch.setattr(ranges, "MEMORY_BUDGET", 1 << 20)  # what a 4096-row export of a big model meets
    with pytest.raises(ExportError, match="over the budget of .* lower --batch or --max-len"):
        outcomes.run(
            EXPORT_BOUNDS, lambda: export_params(cfg, params, tmp_path / "b", batch=4096), reraise=True
        )
    monkeypatch.undo()
    bad = dict(params)
    name = sorted(bad)[3]
    bad[name] = bad[name].copy()
    bad[name].flat[2] = np.nan
    with pytest.raises(ExportError, match=re.escape(f"weight {name!r} holds 1 NaN or infinite value(s)")):
        outcomes.run(EXPORT_BOUNDS, lambda: export_params(cfg, bad, tmp_path / "c"), reraise=True)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists() and not (tmp_path / "c").exists()
