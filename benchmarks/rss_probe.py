"""Resident memory of one session, measured in a fresh process (so nothing else is resident).

    python benchmarks/rss_probe.py KIND ART

prints one JSON line: {"impl", "max_len", "rss_base_bytes", "rss_bytes", "rss_delta_bytes"}.
The baseline is VmRSS after importing everything the kind needs (numpy, onnxruntime,
tickformer.runtime; torch for `torch`); then the session is built and stepped: 8 steps for the
static-cache kinds (their memory does not depend on the position), all max_len steps for the
growing ones (`ort-grow`, `numpy-growing`, `torch`), so their cache is at its largest.
One thread everywhere. Not real-time code.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402
import numpy as np  # noqa: E402
import onnxruntime  # noqa: E402,F401
import subjects  # noqa: E402

from tickformer.runtime import open_artifact  # noqa: E402

GROWING = {"ort-grow", "numpy-growing", "torch"}


def main(kind: str, art: str) -> dict:
    artifact = open_artifact(art)
    config, params = artifact.config, artifact.params()
    torch: Any = None
    if kind == "torch":
        import torch as torch_module

        torch = torch_module
        torch.set_num_threads(1)
    x = np.zeros((1, 1, config.d_in), dtype=np.float32)  # [1, 1, d_in]
    base = harness.rss_bytes()
    if kind == "torch":
        subject = subjects.torch_subject(torch, config, params, x)
    elif kind == "ort-grow":
        subject = subjects.growing_subject(config, params, x)
    else:
        subject = subjects.session_subject(kind, subjects.open_session(Path(art), kind), x)
    subject.reset()
    for _ in range(config.max_len if kind in GROWING else 8):
        subject.step()
    rss = harness.rss_bytes()
    return {
        "impl": kind,
        "max_len": config.max_len,
        "rss_base_bytes": base,
        "rss_bytes": rss,
        "rss_delta_bytes": rss - base,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2])))
