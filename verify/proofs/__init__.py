"""tickformer.verify.proofs: CrossHair proofs of the contracts' specifications (`tickformer prove`).

crosshair    the proofs (PROOFS), each a spec in `tickformer.contracts` with its role (a function the
             runtime calls, a lemma, a reference, a binary64 restatement) and a wrong twin;
             `run_proofs` runs them in worker processes within a time budget
ieee754      model.attention's merge / finalize / _safe_max proven on binary32 with z3 (FPSort,
             RNE); the binary64 drift query that refutes release_time's float twin
graphs       proofs on the exported ONNX graphs (`tickformer prove ART | FILE.onnx`)
wrong_twins  deliberately wrong versions every run must refute
"""

from .crosshair import PROOFS, Proof, ProofOutcome, outcomes_to_json, run_proofs

__all__ = ["PROOFS", "Proof", "ProofOutcome", "outcomes_to_json", "run_proofs"]
