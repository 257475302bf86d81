"""tickformer.verify.proofs: CrossHair proofs of the contracts' specifications (`tickformer prove`).

crosshair    the proofs (PROOFS), each a spec in `tickformer.contracts` and a wrong twin;
             `run_proofs` runs them in worker processes within a time budget
wrong_twins  deliberately wrong versions every run must refute
"""

from .crosshair import PROOFS, Proof, ProofOutcome, outcomes_to_json, run_proofs

__all__ = ["PROOFS", "Proof", "ProofOutcome", "outcomes_to_json", "run_proofs"]
