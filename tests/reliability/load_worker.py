"""Child process of the reliability tests: loads artifacts on request, so that a crash (a
segfault in a native parser) or a hang is observed by the parent instead of killing pytest.

Protocol, one JSON object per line: request {"id": N, "path": DIR, "backend": NAME} on stdin;
reply {"id": N, "outcome": "success" | <TickformerError subclass> | "UNEXPECTED <type>",
"message": str} on stdout after runtime.load(DIR, backend) and one step of zeros (tokens: id 0).
The id lets the parent skip anything else a native library may print on stdout.
Run by `_relutil.Worker`; not a test module.
"""

from __future__ import annotations

import json
import sys


def main() -> int:
    import numpy as np

    from tickformer import runtime
    from tickformer.errors import TickformerError

    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            with runtime.load(request["path"], backend=request["backend"]) as session:
                session.step(np.zeros(session.input_shape, session.input_dtype))
            reply = {"outcome": "success", "message": ""}
        except TickformerError as exc:
            reply = {"outcome": type(exc).__name__, "message": str(exc)[:300]}
        except Exception as exc:  # a defect: reported to the parent, which fails the test
            reply = {"outcome": f"UNEXPECTED {type(exc).__name__}", "message": str(exc)[:300]}
        reply["id"] = request["id"]
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
