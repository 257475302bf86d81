"""tickformer.serve: many streams of one artifact served by NVIDIA Triton Inference Server
(docs/serving.md; the tools layer: it imports artifact, model, contracts and runtime, and only the
CLI imports it).

    repository   `tickformer serve ART --repo DIR`: the model repository, python or onnxruntime form
    slots        the slot pool: every stream's state allocated once, one batched step over any
                 set of slots, each at its own position
    streams      what the served model does with an execution's requests: correlation id ->
                 slots, admission, END, idle reclaim, one batched step per execution
    triton_model the Python-backend model (Triton's TritonPythonModel) over streams.StreamTable
    implicit     the onnxruntime form: the step graph scanned over Triton's batch, implicit state
    server       starting the tritonserver nvidia-pytriton ships, from the server venv
    client       open / step / close, tick-batched groups, sharding by BLAKE2b-64 of the stream id
    load         many streams from one process (the load test, the benchmark) and the reference
    pbtxt        Triton's config.pbtxt written from plain values
"""
