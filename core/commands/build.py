"""`tickformer build ART --backend tensorrt [--precision fp32|fp16] [--workspace MIB]
[--timing-cache PATH] [--version-compatible] [--hardware-compat same|ampere+]`

Builds the artifact's graphs into TensorRT engines with static shapes (min = opt = max), a
persistent timing cache and a workspace limit, and records them (sha256, TensorRT version, GPU,
compute capability, precision, options) in the artifact's manifest. Needs TensorRT, cuda-python
and an NVIDIA GPU; without them it prints one line naming what is missing and exits 1.
Details: tickformer.export.engines, docs/gpu.md.
"""

from __future__ import annotations

import argparse

from tickformer.commands import args as shared

HELP = "build TensorRT engines for an exported artifact (needs a GPU and TensorRT)"


def arguments(p: argparse.ArgumentParser) -> None:
    from tickformer.export.engines import HARDWARE_COMPAT, PRECISIONS

    shared.artifact(p)
    shared.backend(p, default=None, required=True, choices=["tensorrt"], help="engine kind to build")
    shared.trust(p)
    shared.choice(p, "--precision", list(PRECISIONS))
    p.add_argument(
        "--workspace",
        type=int,
        default=1024,
        metavar="MIB",
        help="builder workspace limit in MiB (default 1024)",
    )
    shared.path(
        p,
        "--timing-cache",
        metavar="PATH",
        help="persistent timing cache, read and updated (default: ART/trt-timing.cache)",
    )
    p.add_argument(
        "--version-compatible",
        action="store_true",
        help="engine runs on later TensorRT versions of the same major (slower, trusted host code)",
    )
    p.add_argument(
        "--hardware-compat",
        default="same",
        choices=sorted(HARDWARE_COMPAT),
        help="same: this GPU model only (fastest); ampere+: any GPU of compute capability >= 8.0",
    )
    conv = p.add_mutually_exclusive_group()
    conv.add_argument(
        "--convert",
        dest="convert",
        action="store_true",
        default=None,
        help="fp16 from an fp32 graph: apply the fp16 policy (export/fp16.py) and build strongly typed "
        "(always on TensorRT 11; on 10.x the default is the FP16 builder flag)",
    )
    conv.add_argument(
        "--no-convert",
        dest="convert",
        action="store_false",
        help="fp16 from an fp32 graph via the TensorRT 10.x FP16 builder flag (weak typing)",
    )
    p.add_argument(
        "--graph",
        action="append",
        dest="graphs",
        metavar="NAME",
        help="build only this graph (step, model, encoder); repeatable",
    )


def run(args: argparse.Namespace) -> int:
    from tickformer.export.engines import BuildOptions, build_engines

    options = shared.config(
        BuildOptions,
        args,
        ("precision", "timing_cache", "version_compatible", "hardware_compat", "convert"),
        workspace_mib=args.workspace,
        graphs=tuple(args.graphs) if args.graphs else None,
    )
    for record in build_engines(args.artifact, options, trust=args.trust):
        print(f"built {record.graph}: {record.file} ({record.bytes} bytes, sha256 {record.sha256[:16]}...)")
    return 0
