"""The worker integration, above the domain: the rq worker (``worker``) and its jobs (``jobs``),
the fair dispatch (``dispatch``), recovery after lost workers or a lost Redis (``recovery``), the
device a worker runs on and the classes it serves (``device``, ``classes``), the exclusive timing
lock (``device_lock``), GPU memory shares (``memory_plan``), measurement (``measurement``), the
fleet's status and Prometheus metrics (``fleet``, ``prometheus``), and the GPU acceptance check
(``gpu_acceptance``). Its web pages (``views``, ``apis``, ``urls``) are the only part above it.
The domain never imports this package: it enqueues by queue name (``queueing``)."""
