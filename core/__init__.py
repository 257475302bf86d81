"""tickformer: a formally checked, real-time inference runtime for attention models.

Import name `tickformer`; the package is spread over top-level folders a reader can see:
`model/` (numpy reference Transformer), `export/` (ONNX), `runtime/` (sessions, control loop),
`contracts/` (bounds, stated once), `verify/` (proofs, property tests, certification).
"""

__version__ = "0.1.0"
