"""`tickformer serve ART --repo DIR [--run]`: serve an artifact's streams from Triton Inference Server.

Writes a Triton model repository for the artifact (REPO/NAME: config.pbtxt with the sequence
batcher, and the model), in the Python-backend form (default; runs on the tritonserver that
nvidia-pytriton ships) or the onnxruntime form with implicit state (--form onnxruntime, for
NVIDIA's tritonserver container). `--run` then starts the server on 127.0.0.1 (gRPC port
--grpc-port) from the server venv (.venv-serve: `make serve` builds it) until Ctrl-C or SIGTERM.
See docs/serving.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tickformer.commands import args as shared
from tickformer.errors import ConfigError

HELP = "write a Triton model repository serving the artifact's streams (and run it with --run)"
DESCRIPTION = (
    "Serve many streams of a decoder-only artifact from Triton Inference Server: write the "
    "model repository (the sequence batcher keeps each stream's state by correlation id) and, with --run, "
    "start the server (docs/serving.md)."
)


def arguments(p: argparse.ArgumentParser) -> None:
    shared.artifact(p)
    shared.trust(p)
    p.add_argument(
        "--repo", type=Path, required=True, metavar="DIR", help="model repository (REPO/NAME is replaced)"
    )
    p.add_argument("--name", default="tickformer", help="model name in the repository (default tickformer)")
    p.add_argument(
        "--slots", type=int, default=64, help="streams served at once: the slot pool's size (default 64)"
    )
    p.add_argument(
        "--idle",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds before an idle stream is forgotten (default 30)",
    )
    shared.choice(
        p,
        "--when-full",
        ("queue", "refuse"),
        help="a new stream beyond --slots waits in Triton's backlog (queue) or is refused at once (refuse)",
    )
    p.add_argument(
        "--queue-delay-us",
        type=int,
        default=0,
        help="microseconds the batcher waits to fill a batch (default 0: the requests that arrive during an "
        "execution form the next batch)",
    )
    shared.choice(
        p,
        "--form",
        ("python", "onnxruntime"),
        help="python: runs on the bundled server (default); onnxruntime: implicit state, NVIDIA's container",
    )
    p.add_argument(
        "--run", action="store_true", help="start tritonserver on the repository until Ctrl-C / SIGTERM"
    )
    p.add_argument("--grpc-port", type=int, default=8001, help="gRPC port for --run (default 8001)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address the server listens on for --run (default 127.0.0.1; 0.0.0.0 for clients on other machines)",
    )
    p.add_argument(
        "--server-env", type=Path, default=None, help="the server venv for --run (default .venv-serve)"
    )


def run(args: argparse.Namespace) -> int:
    from tickformer.serve.repository import ServeConfig, write_repository

    serve = shared.config(
        ServeConfig,
        args,
        ("name", "slots", "when_full", "form"),
        idle_s=args.idle,
        max_queue_delay_us=args.queue_delay_us,
    )
    if args.run and serve.form != "python":
        raise ConfigError(
            "--run starts the bundled tritonserver, which has the Python backend only: run the onnxruntime form "
            "in NVIDIA's tritonserver container (docs/serving.md), or drop --form"
        )
    if args.run:
        from tickformer.serve.server import server_env

        server_env(args.server_env)  # before writing anything: the one-line fix when it is missing
    model = write_repository(args.artifact, args.repo, serve, trust=args.trust)
    print(
        f"wrote {model} ({serve.form} form, {serve.slots} slots, idle {serve.idle_s:g} s, {serve.when_full} when full)"
    )
    if not args.run:
        return 0
    from tickformer.serve.server import Server, run_until_signalled

    return run_until_signalled(
        Server(args.repo, grpc_port=args.grpc_port, env=args.server_env, host=args.host)
    )
