"""The evaluation engine: is this model acceptable (``inspect``), what does it cost (``costs``,
``op_costs``, ``profiled_shapes``), run it (``runner``, ``limits``), time it (``timing``) and score
it (``metrics``), for a ``spec.TaskSpec``; NVML readings (``gpu``) and the CUDA self-test
(``selftest``). The ground floor: it imports numpy, onnx, onnxruntime and nvidia-ml-py, and nothing
of Django, Redis, rq or the other packages (tests/test_layers.py holds it to that)."""
