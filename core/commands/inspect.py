"""`tickformer inspect ART [--json]`: verify an artifact's hashes and print its manifest as a
readable summary (model, graphs and their I/O, file sizes, domain, tolerances, measured errors)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from tickformer.commands import args as shared


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "inspect", help="summarise an exported artifact (hashes verified)", description=__doc__
    )
    shared.artifact(p)
    shared.trust(p)
    p.add_argument("--json", action="store_true", help="print the whole manifest as JSON")
    p.set_defaults(func=run)


def _io(specs: list[dict[str, Any]]) -> str:
    return ", ".join(f"{s['name']} {s['dtype']}[{', '.join(str(d) for d in s['shape'])}]" for s in specs)


def _num(value: Any, fmt: str = ".3g") -> str:
    return format(value, fmt) if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def summary(manifest: dict[str, Any]) -> list[str]:
    """The readable lines (pure: manifest in, text out). The loader checked every field the
    runtime uses; fields only shown here (opset, equivalence, versions, ...) may be absent or odd
    in a re-sealed manifest and are printed as '?'."""
    c = manifest["config"]
    kind = (
        f"tokens (V={c['vocab_size']})"
        if c["inputs"] == "tokens"
        else f"continuous (d_in={c['d_in']}, d_out={c['d_out']})"
    )
    layers = f"{c['n_enc_layers']}+{c['n_layers']}" if c["arch"] == "encoder-decoder" else f"{c['n_layers']}"
    lines = [
        f"tickformer artifact v{manifest['version']} (opset {manifest.get('opset', '?')}, created "
        f"{manifest.get('created_utc', '?')})",
        f"model     {c['arch']}, {kind}, d_model {c['d_model']}, heads {c['n_heads']}, d_ff "
        f"{c['d_ff']}, layers {layers}",
        f"static    batch {manifest['batch']}, max_len {manifest['max_len']}",
        f"domain    inputs in [{manifest['input_domain'][0]}, {manifest['input_domain'][1]}]; |output| "
        f"<= {manifest.get('output_bound')} (analytic, any finite input)",
        "graphs",
    ]
    for name, g in sorted(manifest["graphs"].items()):
        size = _dict(manifest["files"].get(g["file"])).get("bytes", 0)
        lines.append(f"  {name:<8} {g['file']} ({size / 1024:.1f} KiB)")
        lines.append(f"           in : {_io(g['inputs'])}")
        lines.append(f"           out: {_io(g['outputs'])}")
    lines.append("files")
    for name, f in sorted(manifest["files"].items()):
        lines.append(f"  {name:<14} {f['bytes']:>10} B  sha256 {f['sha256'][:16]}...")
    tol = manifest["tolerance"]
    lines.append(f"tolerance atol {tol['atol']:.3g}, rtol {tol['rtol']:.3g}: {tol.get('reason', '?')}")
    eq = _dict(manifest.get("equivalence"))
    lines.append(
        f"measured  (seed {eq.get('seed')}, model lengths {eq.get('model_lengths')}, "
        f"{eq.get('step_positions')} step positions)"
    )
    for pair, e in sorted(_dict(eq.get("pairs")).items()):
        e = _dict(e)
        lines.append(f"  {pair:<28} max abs {_num(e.get('max_abs'))}   max rel {_num(e.get('max_rel'))}")
    lines.append(
        "versions  " + ", ".join(f"{k} {v}" for k, v in sorted(_dict(manifest.get("versions")).items()))
    )
    return lines


def run(args: argparse.Namespace) -> int:
    from tickformer.artifact import open_artifact

    art = open_artifact(args.artifact, trust=args.trust)  # verifies every hash (and the signature) first
    if args.json:
        print(json.dumps(art.manifest, indent=2, sort_keys=True))
    else:
        print("\n".join(summary(art.manifest)))
        if art.signed_by is not None:
            print(f"signature manifest.sig by key {art.signed_by} (verified with --trust)")
    return 0
