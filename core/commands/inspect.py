"""`tickformer inspect ART [--json] [--graphs]`: verify an artifact's hashes and print its manifest
as a readable summary (model, graphs and their I/O, file sizes, domain, tolerances, measured
errors); --graphs also checks that the graphs carry weights.npz's weights (export/consistency.py).

`tickformer inspect MODEL.onnx [--step STEP.onnx] [--spec FILE] [--domain LO:HI] [--vocab LO:HI]
[--json] [--time-budget S] [--memory-budget GIB]`: a bare ONNX model's signature as `verify` and
`certify` see it (every input's role -- signal, ids, mask, position, state -- with its batch and
time axes and domain, every output, the sizes tried, the recurrent pairs: KV caches and
fixed-size states, and what was inferred), and warnings: control flow with an unbounded trip
count, a batch or length fixed by the export (with the export argument that frees it), inputs
over the memory budget at the sizes tried; `--json` prints it as a spec file that `verify
--spec` reads back (docs/verify.md). Any failure on a bare model: one line, exit 2."""

from __future__ import annotations

import argparse
import hashlib
import json
from typing import Any

from tickformer.commands import args as shared
from tickformer.commands import user_model

HELP = "summarise an exported artifact (hashes verified)"
DESCRIPTION = __doc__  # wrapped by argparse


def arguments(p: argparse.ArgumentParser) -> None:
    shared.artifact(p, help="artifact directory (tickformer export --out), or a bare .onnx model")
    shared.trust(p)
    shared.bare_onnx(p)
    p.add_argument(
        "--max-t", type=int, default=16, metavar="T", help="bare ONNX: longest sequence (default 16)"
    )
    user_model.budget_flags(p, "inspect")
    p.add_argument(
        "--json",
        action="store_true",
        help="print the whole manifest as JSON (bare ONNX: the signature as a spec file)",
    )
    p.add_argument(
        "--graphs",
        action="store_true",
        help="also rebuild every graph from weights.npz and compare their tensors (export checked it before "
        "sealing; loading verifies hashes and the signature only)",
    )


def _shown(value: Any) -> str:
    """A name from the user's data as printed: printable characters only (no terminal escapes), <= 48."""
    return "".join(c if c.isprintable() else "?" for c in str(value))[:48]


def _columns(manifest: dict[str, Any]) -> list[str]:
    """The input columns (name, unit, per-column domain) of a model trained on logged signals."""
    columns = manifest.get("input_domain_columns")
    signals = _dict(manifest.get("signals"))
    named = {c.get("index"): c for c in signals.get("inputs", []) if isinstance(c, dict)}
    if not isinstance(columns, list) and not named:
        return []
    lines = ["columns   x[..., j], in this order (per-column domain checked at every step):"]
    for j in range(len(columns) if isinstance(columns, list) else len(named)):
        col = _dict(named.get(j))
        unit = f" [{_shown(col['unit'])}]" if col.get("unit") else ""
        dom = f" in [{columns[j][0]}, {columns[j][1]}]" if isinstance(columns, list) else ""
        lines.append(f"  {j:>3} {_shown(col.get('name', '?'))}{unit}{dom}")
    outputs = [c for c in signals.get("outputs", []) if isinstance(c, dict)]
    if outputs:
        shown = ", ".join(f"{_shown(c.get('name'))} t+{_shown(c.get('horizon'))}" for c in outputs[:8])
        lines.append(f"outputs   y[..., k]: {shown}{', ...' if len(outputs) > 8 else ''} (change from t)")
    return lines


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
        *_columns(manifest),
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


def _axis(value: int | None) -> str:
    return "none" if value is None else str(value)


def foreign_summary(
    sig: Any, sizes: dict[str, tuple[int, str]], warnings: list[str] | None = None
) -> list[str]:
    """The readable lines of a bare model's signature (pure: signature in, text out)."""
    lines = [f"bare ONNX model {sig.path} (opset {sig.opset}, producer {sig.producer or '?'})"]
    for name, (size, digest) in sizes.items():
        lines.append(f"  {name:<20} {size:>10} B  sha256 {digest[:16]}...")
    lines.append("inputs")
    for i in sig.inputs:
        dims = "[" + ", ".join("?" if d is None else str(d) for d in i.dims) + "]"
        axes = f"batch axis {_axis(i.batch_axis)}, time axis {_axis(i.time_axis)}"
        what = ""
        if i.role == "signal":
            what = f", domain {list(zip(i.lo, i.hi)) if i.lo is not None else 'not declared'}"
        elif i.role == "ids":
            what = f", ids in {list(i.vocab) if i.vocab is not None else 'not declared'}"
        elif i.role == "mask":
            what = f", {i.valid} = a real position, padding pattern {i.pattern}"
        elif i.role == "state":
            cache = sig.cache is not None and sig.cache.kind(i.name) == "kv"
            axes = f"batch axis {_axis(i.batch_axis)}" + (
                f", positions along axis {i.time_axis}" if cache else ""
            )
            what = ", fed the reset state: " + ("a cache of length 0" if cache else "zeros")
        lines.append(f"  {i.name:<20} {i.dtype}{dims}  {i.role}: {axes}{what}")
    lines.append("outputs")
    for o in sig.outputs:
        dims = "[" + ", ".join("?" if d is None else str(d) for d in o.dims) + "]"
        extra = (", bound " + format(o.bound, "g")) if o.bound is not None else ""
        if o.cache:
            kind = (
                sig.cache.kind(next((p for p, q in sig.cache.pairs if q == o.name), ""))
                if sig.cache
                else "kv"
            )
            extra += ", the state it hands on" if kind == "state" else ", the cache it hands on (present)"
        lines.append(
            f"  {o.name:<20} {o.dtype}{dims}  batch axis {_axis(o.batch_axis)}, time axis {_axis(o.time_axis)}{extra}"
        )
    ranges = ", ".join(f"{g} {lo}..{hi}" for g, (lo, hi) in sig.ranges.items()) or "none (static shapes)"
    lines.append(f"sizes     {ranges}")
    lines.append(f"causal    {'along ' + repr(sig.causal_group) if sig.causal_group else 'not checked'}")
    if sig.cache is not None:
        c = sig.cache
        graph = "the model itself (its own step graph)" if c.same else f"step graph {c.step}"
        lines.append(f"recurrent {graph}, prefill {c.prefill}")
        for past, present in c.pairs:
            ba = c.batch_axis.get(past)
            if c.kind(past) == "kv":
                lines.append(
                    f"  {past} <- {present}: a KV cache, positions along axis {c.time_axis[past]}, batch axis "
                    f"{_axis(ba)}"
                )
            else:
                lines.append(f"  {past} <- {present}: a recurrent state, batch axis {_axis(ba)}")
        for i in c.inputs:
            lines.append(f"  step input {i.name}: {i.role}, span {i.span}")
    for warning in [*sig.warnings, *(warnings or [])]:
        lines.append(f"warning   {warning}")
    for note in sig.notes:
        lines.append(f"inferred  {note}")
    return lines


def _run_foreign(args: argparse.Namespace, budget: Any) -> int:
    from tickformer.artifact.foreign.inference import open_signature
    from tickformer.artifact.foreign.memory import over_memory
    from tickformer.artifact.foreign.spec import Flags
    from tickformer.contracts.input_domain import parse_domain
    from tickformer.errors import ConfigError

    if args.trust is not None:
        raise ConfigError(
            f"--trust applies to signed artifacts; {args.artifact} is a bare .onnx file, which carries no signature"
        )
    flags = Flags(
        domain=parse_domain(args.domain) if args.domain is not None else None,
        vocab=shared.parse_vocab(args.vocab),
        max_t=args.max_t,
        step=args.step,
        require_domain=False,
    )
    files: dict[str, tuple[int, str]] = {}
    sig, data, step_data = open_signature(args.artifact, spec=args.spec, flags=flags, files=files)
    if args.json:
        print(json.dumps(sig.spec(), indent=2))
        return 0
    if not files:  # a caller's own open_signature without the file record
        files = {"model": (len(data), hashlib.sha256(data).hexdigest())}
    too_big = over_memory(sig, budget.memory)
    print("\n".join(foreign_summary(sig, files, [too_big] if too_big else [])))
    return 0


def run(args: argparse.Namespace) -> int:
    from tickformer.artifact import open_artifact

    if user_model.is_bare(args.artifact, args):
        return user_model.guarded(args, "inspect", lambda budget: _run_foreign(args, budget))
    given = [
        f
        for f, v in (
            ("--step", args.step),
            ("--spec", args.spec),
            ("--domain", args.domain),
            ("--vocab", args.vocab),
        )
        if v is not None
    ]
    if given:
        from tickformer.errors import ConfigError

        raise ConfigError(
            f"{', '.join(given)} describe bare ONNX models; {args.artifact} is an artifact directory, whose manifest "
            "declares everything: remove them"
        )

    art = open_artifact(args.artifact, trust=args.trust)  # verifies every hash (and the signature) first
    if args.graphs:
        from tickformer.export.consistency import check_graph_weights

        check_graph_weights(art)  # ArtifactError naming the tensors that differ
    if args.json:
        print(json.dumps(art.manifest, indent=2, sort_keys=True))
    else:
        print("\n".join(summary(art.manifest)))
        if art.signed_by is not None:
            print(f"signature manifest.sig by key {art.signed_by} (verified with --trust)")
        if args.graphs:
            print("graphs    carry weights.npz's weights (rebuilt from it, every tensor compared)")
    return 0
