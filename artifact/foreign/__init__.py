"""Bare ONNX models users bring (not our artifacts): their declared I/O, a property spec file, and
the signature `verify`, `certify`, `check` and `inspect` work from (docs/verify.md).

    graph        `read_graph(path)`: the bytes and ModelProto of a .onnx file, read once through
                 `tickformer.safe_files` (a regular file; a FIFO never blocks); tensors kept in
                 external files are refused (nothing but the file itself is ever read).
                 `graph_io(model)`: every graph input and output: name, dtype, dims (int static,
                 str symbolic, None unnamed dynamic)
    spec         the spec file's schema (SPEC_SCHEMA, published in docs/verify.md), `load_spec`
                 (TOML or JSON, by suffix) and `check_spec` with errors naming the key and the
                 fix; `Flags`, what the command line says
    signature    the resolved `Signature`: per input its role, domain, batch and time axes; per
                 output its axes and bound; the size range of every dynamic dimension; the
                 KV-cache pairing of a step graph (`CacheSig`)
    roles        per-input inference: role, axes, domain, vocabulary, mask convention; the size
                 groups dynamic dimensions share
    inference    `resolve(full, step, doc, flags)` and `open_signature(path)`: the Signature from
                 the graph, the spec and the flags (its docstring: precedence and the rules)

Pure functions of the parsed graph and spec except `read_graph`/`load_spec` (file reads). Not
real-time code.
"""
