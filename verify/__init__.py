"""tickformer.verify: evidence that the contracts hold.

    proofs       CrossHair proofs of the contracts' specifications, with wrong twins
    properties   Hypothesis property tests of exported models on a real backend
    assurance    the assurance table: which contract is proven, property-tested, monitored

Latency certification has its own package, `tickformer.certify`.
"""
