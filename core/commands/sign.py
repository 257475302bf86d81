"""`tickformer sign ART --key NAME`: sign an exported artifact with a private key.

Verifies the artifact first (every hash), then writes ART/manifest.sig: an Ed25519 signature of
its sealed manifest. Load it with `--trust NAME.pub` (or runtime.load(ART, trust="NAME.pub")) to
refuse anything that was changed and re-sealed since. See SECURITY.md (signed artifacts).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tickformer.commands import args as shared


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "sign",
        help="sign an exported artifact (writes ART/manifest.sig)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    shared.artifact(p)
    p.add_argument("--key", type=Path, required=True, metavar="NAME", help="private key (tickformer keygen)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from tickformer.artifact.signer import sign_artifact

    key_id = sign_artifact(args.artifact, args.key)
    print(f"signed {args.artifact} with key {key_id}; load it with --trust {args.key}.pub")
    return 0
