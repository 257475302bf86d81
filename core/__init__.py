"""tickformer: a formally checked, real-time inference runtime for attention models.

Import name `tickformer`; the package is spread over top-level folders a reader can see, in the
one direction imports flow (docs/architecture.md): `core/` (this package: errors, validation,
atomic writes, sealed manifests, the safe file reader, signatures; the CLI), `contracts/`
(bounds, stated once), `model/` (numpy reference Transformer, training), `artifact/` (the
exported format and its reader), `export/` (ONNX) and `codegen/` (C), `runtime/` (sessions,
backends, control loop), then `verify/` (proofs, property tests), `certify/` (latency
certification) and `control/` (controllers, plants).
"""

__version__ = "0.1.0"
