"""model/names.py composes exactly the names the model had before it existed: they are ONNX
initializer names and checkpoint keys, so a change would orphan every saved model."""

from __future__ import annotations

import pytest

from tickformer.model import names
from tickformer.model.config import PRESETS
from tickformer.model.transformer import parameter_shapes


def _names_as_spelled_before(config) -> list[str]:
    """The scheme as the f-strings at each site spelled it (the reference this test pins)."""
    out = (
        ["tok_embed"] if config.inputs == "tokens" else ["in_proj.w", "in_proj.b", "out_proj.w", "out_proj.b"]
    )
    attn = [f"{w}_{x}" for x in "qkvo" for w in "wb"]
    ffn = ["w1", "b1", "w2", "b2"]
    for i in range(config.n_enc_layers):
        out += [f"enc.{i}.self_attn.{n}" for n in attn] + [f"enc.{i}.ln1.g", f"enc.{i}.ln1.b"]
        out += [f"enc.{i}.ffn.{n}" for n in ffn] + [f"enc.{i}.ln2.g", f"enc.{i}.ln2.b"]
    cross = config.arch == "encoder-decoder"
    for i in range(config.n_layers):
        out += [f"dec.{i}.self_attn.{n}" for n in attn] + [f"dec.{i}.ln1.g", f"dec.{i}.ln1.b"]
        if cross:
            out += [f"dec.{i}.cross_attn.{n}" for n in attn] + [f"dec.{i}.ln2.g", f"dec.{i}.ln2.b"]
        last = "ln3" if cross else "ln2"
        out += [f"dec.{i}.ffn.{n}" for n in ffn] + [f"dec.{i}.{last}.g", f"dec.{i}.{last}.b"]
    return out


@pytest.mark.parametrize("preset_name", sorted(PRESETS))
def test_names_and_their_order_are_unchanged(preset_name: str) -> None:
    """A windowed preset (control-hidden) has the same names plus one relative-position bias
    per layer (dec.i.self_attn.rel_bias); every other name and its order are as before."""
    config = PRESETS[preset_name]
    expected = _names_as_spelled_before(config)
    got = list(names.parameter_names(config))
    if config.window is not None:
        bias = [n for n in got if n.endswith(".self_attn.rel_bias")]
        assert bias == [f"dec.{i}.self_attn.rel_bias" for i in range(config.n_layers)]
        got = [n for n in got if n not in bias]
    assert got == expected
    assert [n for n in parameter_shapes(config) if not n.endswith(".rel_bias")] == expected


def test_group_and_layer_api() -> None:
    layer = names.decoder_layer(1, cross=True)
    assert layer.self_attn["w_q"] == "dec.1.self_attn.w_q"
    assert layer.cross_attn is not None and layer.cross_attn["b_o"] == "dec.1.cross_attn.b_o"
    assert layer.cross_attn_norm is not None and layer.cross_attn_norm["g"] == "dec.1.ln2.g"
    assert layer.ffn_norm["b"] == "dec.1.ln3.b"
    plain = names.decoder_layer(0, cross=False)
    assert plain.cross_attn is None and plain.ffn_norm["g"] == "dec.0.ln2.g"
    assert names.encoder_layer(0).ffn.names() == (
        "enc.0.ffn.w1",
        "enc.0.ffn.b1",
        "enc.0.ffn.w2",
        "enc.0.ffn.b2",
    )
    assert names.EMBEDDING[names.TOK_EMBED] == "tok_embed" and names.IN_PROJ["w"] == "in_proj.w"
    assert names.leaf("dec.0.ln1.g") == "g"
    params = {"enc.0.ln1.g": 1, "enc.0.ln1.b": 2}
    assert names.encoder_layer(0).self_attn_norm.take(params) == {"g": 1, "b": 2}
    with pytest.raises(KeyError, match="its weights are"):
        names.IN_PROJ["g"]
