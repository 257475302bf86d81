"""`tickformer export CKPT --out ART [--max-len N] [--batch B] [--opset 17] [--domain LO:HI]`.

Builds the ONNX graphs from the checkpoint's numpy parameters, checks them (onnx.checker full
check, strict shape inference), compares numpy / onnx.reference / onnxruntime on seeded inputs,
and writes the artifact directory atomically (format: docs/artifact_format.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tickformer.commands import args as shared

HELP = "export a checkpoint to an ONNX artifact directory"


def arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("checkpoint", type=Path, help="checkpoint directory (tickformer train --out)")
    shared.out(
        p, metavar="ART", help="artifact directory to write (replaced atomically if it is an artifact)"
    )
    p.add_argument(
        "--max-len",
        type=int,
        default=None,
        help="static KV-cache length and longest sequence (default: the checkpoint's max_len)",
    )
    p.add_argument("--batch", type=int, default=1, help="static batch size of every graph (default 1)")
    p.add_argument("--opset", type=int, default=17, help="ONNX opset (default 17: TensorRT 10.3 / JetPack 6)")
    shared.domain(
        p,
        help="declared input domain LO:HI for continuous inputs, or LO:HI,LO:HI,... one per input column "
        "(default: checkpoint meta -- per column for a model trained with --data -- else -10:10)",
    )
    shared.choice(
        p,
        "--precision",
        ["fp32", "fp16"],
        help="fp16: mixed-precision graphs (fp32 scores/softmax/LayerNorm statistics), error measured and recorded",
    )
    shared.seed(p, help="seed of the export-time equivalence inputs")
    p.add_argument(
        "--release",
        type=int,
        default=None,
        metavar="N",
        help="the artifact's release number, monotonic (default: the export's UNIX time in seconds); "
        "devices refuse releases below their --min-release",
    )
    shared.path(
        p,
        "--sign",
        metavar="NAME",
        help="private key (tickformer keygen): write the artifact signed",
    )


def run(args: argparse.Namespace) -> int:
    from tickformer.artifact import open_artifact
    from tickformer.contracts.input_domain import parse_columns, parse_domain
    from tickformer.export.writer import export_artifact

    if args.domain is None:
        domain = None
    else:  # LO:HI, or LO:HI,LO:HI,... one per input column
        domain = parse_columns(args.domain) if "," in args.domain else parse_domain(args.domain)
    out = export_artifact(
        args.checkpoint,
        args.out,
        max_len=args.max_len,
        batch=args.batch,
        opset=args.opset,
        domain=domain,
        seed=args.seed,
        precision=args.precision,
        sign=args.sign,
        release=args.release,
    )
    art = open_artifact(out)
    worst = max(p["max_abs"] for p in art.manifest["equivalence"]["pairs"].values())
    tol = art.tolerance
    print(
        f"exported {out}: graphs {', '.join(sorted(art.manifest['graphs']))}; max_len {art.max_len}, "
        f"batch {art.batch}, "
        f"opset {art.manifest['opset']}; worst backend disagreement {worst:.3g} (tolerance "
        f"atol={tol['atol']:.3g}, rtol={tol['rtol']:.3g})" + ("; signed (manifest.sig)" if args.sign else "")
    )
    return 0
