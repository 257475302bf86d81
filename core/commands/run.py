"""`tickformer run ART --backend ort --input FILE.npy [--output OUT.npy] [--contracts off|check|monitor]`.

Decoder-only: runs the sequence in FILE.npy ([B, T, d_in] float, or [T, d_in] when B = 1; tokens
[B, T] / [T] int) step by step through a session and writes the outputs [B, T, d_out | V]
(float64 input is converted to float32). Encoder-decoder: FILE.npy holds the source tokens,
`--bos ID --max-new N` decode greedily and the generated tokens are written.
Prints the per-step latency (p50/p99/max, perf_counter_ns).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

HELP = "run an artifact step by step on an input file"


def arguments(p: argparse.ArgumentParser) -> None:
    from tickformer.commands import args as shared

    shared.artifact(p)
    shared.backend(p)
    shared.trust(p)
    p.add_argument(
        "--input", type=Path, required=True, help=".npy input sequence (or source tokens, encoder-decoder)"
    )
    p.add_argument(
        "--output", type=Path, default=None, help=".npy file for the outputs (default: print a summary only)"
    )
    shared.choice(p, "--contracts", ("off", "check", "monitor"), help="run-time contract mode")
    p.add_argument(
        "--bos",
        type=int,
        default=None,
        help="encoder-decoder: start token id (default: from the checkpoint meta)",
    )
    p.add_argument(
        "--eos",
        type=int,
        default=None,
        help="encoder-decoder: stop token id (default: from the checkpoint meta)",
    )
    p.add_argument(
        "--max-new", type=int, default=None, help="encoder-decoder: tokens to generate (default max_len)"
    )
    p.add_argument(
        "--binding",
        choices=("iobinding", "run"),
        default=None,
        help="ort: IOBinding (default) or InferenceSession.run",
    )
    shared.threads(p, default=None)
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the sequence this many times (reset() in between) for more latency samples",
    )


def _read(path: Path, session) -> np.ndarray:
    import io

    from tickformer.errors import FileRefused, InputError
    from tickformer.model.checkpoint import declared_bytes, read_npy_header
    from tickformer.safe_files import read_path

    try:
        raw = read_path(path)  # a regular file, read once (a FIFO never blocks)
    except FileRefused as exc:
        raise InputError(f"--input {exc}; pass a .npy file saved with np.save") from None
    if not raw.startswith(b"\x93NUMPY"):
        raise InputError(f"{path} is not a .npy file (it lacks the NumPy magic bytes); save it with np.save")
    header = read_npy_header(io.BytesIO(raw))
    if header is None:
        raise InputError(f"cannot read the .npy header of {path}; save it with np.save")
    declared = declared_bytes(header)
    if declared > len(raw):  # np.load would allocate it before reading a byte
        raise InputError(
            f"{path}: its .npy header declares shape {header[0]} ({declared} bytes), more "
            f"than the file's {len(raw)} bytes (cut short, or not written by np.save); save it again with np.save"
        )
    try:
        data = np.load(io.BytesIO(raw), allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        raise InputError(f"cannot read {path} as a .npy array ({exc}); save it with np.save") from None
    if session.tokens:
        if data.dtype.kind not in "iu":
            raise InputError(f"{path}: token input must be integer, got {data.dtype}")
        data = data.astype(np.int64)
        return data[None] if data.ndim == 1 else data
    if data.dtype.kind != "f":
        raise InputError(f"{path}: input must be floating point, got {data.dtype}")
    data = data.astype(np.float32)
    return data[None] if data.ndim == 2 else data


def _check_output(output: Path | None, artifact: Path) -> None:
    """--output must not be inside the artifact: an artifact holds only the files export wrote,
    and a file added there makes it fail to load (unlisted file)."""
    import os

    from tickformer.errors import InputError

    if output is None:
        return
    try:
        inside = os.path.commonpath(
            [os.path.realpath(artifact), os.path.realpath(output.parent)]
        ) == os.path.realpath(artifact)
    except (OSError, ValueError):
        return
    if inside:
        raise InputError(
            f"--output {output} is inside the artifact {artifact}; write it elsewhere (an artifact holds only "
            "the files export wrote, and any other file there stops it from loading)"
        )


def _save(path: Path, out: np.ndarray) -> None:
    from tickformer.errors import InputError

    try:
        np.save(path, out)
    except OSError as exc:
        raise InputError(
            f"cannot write --output {path}: {exc.strerror or exc}; choose a writable path (its folder must exist)"
        ) from None


def _steps(session, data: np.ndarray, repeat: int, path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Step through data [B, T, ...] `repeat` times; outputs of the last pass, every step's time.
    The session checks every input (shape, dtype, values, and the length: past max_len a static
    cache raises ContextFull, a windowed or ssm session goes on); its error is re-raised naming
    the file and the position."""
    from tickformer.errors import ContextFull, InputError, TickformerError

    if data.ndim < 2 or data.shape[1] < 1:
        want = f"[{session.batch}, T]" if session.tokens else f"[{session.batch}, T, {session.config.d_in}]"
        raise InputError(
            f"{path}: shape {data.shape} is not a sequence {want}, T >= 1; save it in that shape"
        )
    t = data.shape[1]
    xs = [np.ascontiguousarray(data[:, i : i + 1]) for i in range(t)]  # prepared before timing
    out = np.zeros((session.batch, t) + session.backend.step_output_shape[2:], dtype=np.float32)
    times = np.zeros(repeat * t, dtype=np.int64)
    for r in range(repeat):
        session.reset()
        for i, x in enumerate(xs):
            start = time.perf_counter_ns()
            try:
                y = session.step(x)
            except ContextFull:
                raise ContextFull(
                    f"{path}: {t} positions do not fit this artifact's static cache of max_len {session.max_len}; "
                    f"re-export with --max-len {t} or split the sequence"
                ) from None
            except TickformerError as exc:
                raise type(exc)(f"{path} (shape {data.shape}), position {i}: {exc}") from None
            times[r * t + i] = time.perf_counter_ns() - start
            out[:, i] = y[:, 0]
    return out, times


def run(args: argparse.Namespace) -> int:
    from tickformer import validation
    from tickformer.errors import InputError
    from tickformer.runtime import load

    options = {k: v for k, v in (("binding", args.binding), ("threads", args.threads)) if v is not None}
    if options and not args.backend.startswith("ort"):
        raise InputError(
            f"--binding/--threads are options of the ort backends, not of {args.backend!r}; drop them "
            "or use --backend ort"
        )
    validation.positive_int(args.repeat, "--repeat", hint="e.g. --repeat 10", error=InputError)
    _check_output(args.output, args.artifact)
    with load(
        args.artifact, backend=args.backend, contracts=args.contracts, trust=args.trust, **options
    ) as session:
        data = _read(args.input, session)
        if session.config.arch == "encoder-decoder":
            if args.bos is None and session.special_token("bos") is None:
                raise InputError(
                    "encoder-decoder artifacts need --bos ID (the start token; the checkpoint meta records none)"
                )
            out = session.generate(data, args.max_new or session.max_len, bos=args.bos, eos=args.eos)
            times = None
        else:
            out, times = _steps(session, data, args.repeat, args.input)
        if args.output is not None:
            _save(args.output, out)
        print(
            f"{args.backend}: {data.shape} -> {out.shape}"
            + (f", written to {args.output}" if args.output else "")
        )
        if times is not None and times.size:
            p50, p90, p99 = np.percentile(times, [50, 90, 99])
            print(
                f"step latency (Session.step incl. validation): p50 {p50 / 1e3:.1f} us, p90 {p90 / 1e3:.1f} us, "
                f"p99 {p99 / 1e3:.1f} us, max {times.max() / 1e3:.1f} us over {times.size} steps"
            )
        if session.monitor is not None:
            print(f"contracts: {session.monitor.summary()['contracts']}")
    return 0
