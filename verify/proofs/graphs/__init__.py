"""Proofs about the exported graphs themselves: which cache rows (or which inputs along the time
axis) each output of an ONNX graph can depend on, for *every* position of a finite position
domain, and that the graph's work per call is bounded (`tickformer prove ART`, `prove FILE.onnx`).

The claims (for our artifacts; `specs.prove_model_proto`):
    step.onnx, for every pos in [0, max_len):
        reads only live rows   no output depends on a cache row r unless the contract says the step
                               at pos reads it (`contracts.masking.cache_row_live(r, pos)`: r < pos);
        reads every live row   the output y has an unblocked path from every live row of every
                               layer's K and V cache, and from the step's own new K/V rows;
    model.onnx, for every length T in [1, max_len] and every t < T:
        causal                 y[:, t] depends on no x[:, t'] unless `masking.causal_allowed(t, t', 0)`;
        reads every past input y[:, t] has an unblocked path from every x[:, t'], t' <= t;
    both:
        bounded work           no control flow, static shapes (step: every input and every
                               intermediate shape is the same at every position; model: only T
                               varies, T <= max_len), no shape computed from data.

How (no sampling). The graph is interpreted once per state of the domain (each pos, each T):
  * the *position subgraph* -- every node whose inputs are constants, the integer domain inputs
    (pos) or shapes -- is evaluated concretely with onnx.reference's operator implementations
    (the ONNX reference semantics), so the masks are exactly what the graph computes for that
    state;
  * every other tensor is abstract: per element, the set of *atoms* (a cache row, an input time
    step, another input, one of the step's own new rows) it can depend on, kept as bitsets; a
    Where whose condition is concrete selects elementwise, so a row selected out by the mask
    does not reach its consumers. Per element the abstraction also keeps a *known constant*
    c ("this element is exactly c, or NaN when one of its own atoms is"): Where(mask, s, -inf)
    gives exactly -inf, Softmax and Exp then give exactly 0.
  * A product with an exactly-zero factor (MatMul(p, V) where p's weight is 0) is not
    independent of the other factor: 0 * inf and 0 * NaN are NaN (and 0 * v carries v's sign
    into a zero result). Atoms reaching an output *only* through such products are reported
    apart ("soft"): the output is independent of them if and only if those factors are finite.
    A claim that holds for the hard atoms but not for the soft ones is "proven if finite", and
    the report names the nodes where the zero weight meets the unselected factor. Selecting V
    as well (export/blocks.attend_step: Gather(Concat(V, zero row), index), stale rows naming the
    zero row) removes them: 0 * 0 is 0 whatever the stale row holds.
The abstraction over-approximates: an atom outside an element's set cannot influence it (every
operator rule is a union, narrowed only by concrete selection and exact zeros). "reads every live
row" is the structural converse: the live row is not selected out on some path; it does not
claim the values cannot cancel. Operators outside the supported set, or a shape computed from
data, end the proof as FAILED ("cannot analyse"), never as proven.

Position domains are generic (`PositionDomain`): `StepPositions` (a static cache),
`FullLengths` (the full pass), `RingPositions` (a sliding window on a ring of slots, from
`contracts.ring_buffer`; for the windowed step graph). A domain lists its states (the feeds of
the integer inputs and the shapes of the data inputs) and, per state, which rows each target
may read (from the contracts' predicates, evaluated once into a table).

A step graph must not depend on a row outside the live set *whatever it holds* (stale rows hold
the previous sequence's keys after a reset, or anything a fault left): there "proven if finite"
is a FAILED claim. Our step graphs select V rows as well as scores (export/blocks.attend_step),
so "reads only live rows" is proven outright; the full pass multiplies zero weights by the V of
later inputs, so its causality is "proven if finite" (inputs are finite by the input-domain
contract, checked at run time), for every length T <= max_len (a windowed model.onnx accepts
any T; longer calls are not covered by the enumeration).

ssm artifacts (`prove_ssm_step`, `prove_ssm_model`): the step has no position input and no
cache, so the claims are position-free: its only inputs are x and the state (state-only), every
layer's state reaches y, a layer's new state reads no deeper layer's state, bounded work; the full
graph is one Scan, proven causal *for every T* from its structure (forward scan over the time
axis of the input, a constant initial state, the body's outputs a function of (state, x_t) only),
with its trip count the length of x.

Not real-time code. Cost: one interpretation per state: the tiny preset (max_len 16) well under a
second for both graphs; the control preset (max_len 256, two layers) 8-16 s on the shared 2-core
CI machine, most of it the full pass (T^2 grows with T); measured per artifact kind in
claims/results/prove_graphs.json (claims/prove_graphs.py). ssm artifacts: one interpretation each.

The package, one idea per module (the way onnx's reference evaluator keeps one operator per file):
    domains       the position domains: their states and the rows each state may read
    values        the abstract tensors (bitsets of atoms, known constants) and the union rule
    proto         what is read off the ONNX protos (attributes, element types, declared shapes)
    ops/          one module per operator rule (`op_*.py`); `ops.HANDLERS` maps op_type -> rule
    interpreter   one graph at one state: the position subgraph concrete, the rest abstract
    claims        the claims decided over every state of a domain (`prove_graph`), the statuses
    specs         our attention artifacts' step and full-pass graphs (`prove_model_proto`)
    ssm           ssm artifacts: the position-free step, the full graph as one Scan
    driver        loading through the graph rules, dispatch by artifact kind or file, the report
"""
