"""`tickformer sign ART --key NAME [--library LIB]`: sign an exported artifact with a private key.

Verifies the artifact first (every hash), then writes ART/manifest.sig: an Ed25519 signature of
its sealed manifest. Load it with `--trust NAME.pub` (or runtime.load(ART, trust="NAME.pub")) to
refuse anything that was changed and re-sealed since. See SECURITY.md (signed artifacts).

--library LIB (a libtf_model.so `make shared` built from `tickformer codegen ART`): sign that
library's build for ART instead -- build.json and build.sig beside it -- so a device that loads ART
with `--backend c --trust NAME.pub` runs exactly that library (and no other) without compiling.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tickformer.commands import args as shared

HELP = "sign an exported artifact (writes ART/manifest.sig)"


def arguments(p: argparse.ArgumentParser) -> None:
    shared.artifact(p)
    p.add_argument("--key", type=Path, required=True, metavar="NAME", help="private key (tickformer keygen)")
    shared.path(
        p,
        "--library",
        metavar="LIB",
        help="sign this compiled library's build for ART (build.json + build.sig beside it), not ART",
    )


def run(args: argparse.Namespace) -> int:
    from tickformer.artifact.signer import sign_artifact
    from tickformer.signing import public_key_file

    if args.library is not None:
        from tickformer.codegen.toolchain import sign_library

        key_id = sign_library(args.artifact, args.library, args.key)
        print(
            f"signed the build of {args.library} for {args.artifact} with key {key_id} "
            f"({args.library.parent}/build.json, build.sig); load it with --backend c "
            f"--library {args.library} --trust {public_key_file(args.key)}"
        )
        return 0
    key_id = sign_artifact(args.artifact, args.key)
    print(f"signed {args.artifact} with key {key_id}; load it with --trust {public_key_file(args.key)}")
    return 0
