"""Load time of backend c with and without a trust key (issue 38): the first build, a cache hit,
and a load under trust= in a fresh process (the cached library is rebuilt once per process).

    .venv/bin/python experiments/library_trust_cost.py tiny control
"""

import sys
import tempfile
import time
from pathlib import Path

import tickformer.codegen  # noqa: F401  (registers backend c's library builder)
from tickformer import runtime, signing
from tickformer.artifact.signer import sign_artifact
from tickformer.export.writer import export_params
from tickformer.model import init_params, preset
from tickformer.runtime.backends import c

root = Path(tempfile.mkdtemp())
priv, pub = signing.generate_key(root / "k")
for name in sys.argv[1:]:
    cfg = preset(name)
    art = root / name
    export_params(cfg, init_params(cfg, 0), art, lengths=[1, cfg.max_len])
    sign_artifact(art, priv)
    cache = root / f"cache-{name}"
    t = time.perf_counter()
    runtime.load(art, backend="c", cache_dir=cache).close()
    cold = time.perf_counter() - t
    rows = []
    for _ in range(3):
        t = time.perf_counter()
        runtime.load(art, backend="c", cache_dir=cache).close()
        hit = time.perf_counter() - t
        c._BUILT_HERE.clear()
        t = time.perf_counter()
        runtime.load(art, backend="c", cache_dir=cache, trust=pub).close()
        trusted = time.perf_counter() - t
        rows.append((hit, trusted))
    hit, trusted = min(r[0] for r in rows), min(r[1] for r in rows)
    print(
        f"{name}: d_model {cfg.d_model} layers {cfg.n_layers} max_len {cfg.max_len}: first build {cold:.2f} s; "
        f"cache hit {hit:.3f} s; under trust (fresh process: rebuild) {trusted:.2f} s"
    )
