"""`tickformer keygen --out NAME`: a new Ed25519 key pair for signing artifacts.

Writes NAME (the private key, PEM PKCS#8, mode 0600: keep it on the machine that exports) and
NAME.pub (the public key, PEM: give it to whoever loads the artifacts, `--trust NAME.pub`).
Refuses to overwrite an existing key. See SECURITY.md (signed artifacts).
"""

from __future__ import annotations

import argparse

from tickformer.commands import args as shared

HELP = "make an Ed25519 key pair for signing artifacts (NAME private, NAME.pub public)"


def arguments(p: argparse.ArgumentParser) -> None:
    shared.out(p, metavar="NAME", help="private key file (NAME.pub beside)")


def run(args: argparse.Namespace) -> int:
    from tickformer import signing

    private, public = signing.generate_key(args.out)
    key = signing.load_public_key(public)
    print(f"wrote {private} (private, 0600) and {public} (public); key id {signing.key_id(key)}")
    return 0
