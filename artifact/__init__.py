"""tickformer.artifact: the exported artifact's format (`format`) and its verifying reader (`reader`).

    from tickformer.artifact import open_artifact
    art = open_artifact("ART")      # manifest, self-hash, schema, every file's SHA-256, config
    art.config, art.batch, art.max_len, art.input_domain, art.params()

The writer is `tickformer.export.writer`; both use `tickformer.artifact.format`.
"""

from .format import FORMAT, MANIFEST, VERSION, WEIGHTS
from .reader import Artifact, open_artifact, read_manifest, verified_graph_bytes

__all__ = [
    "FORMAT",
    "MANIFEST",
    "VERSION",
    "WEIGHTS",
    "Artifact",
    "open_artifact",
    "read_manifest",
    "verified_graph_bytes",
]
