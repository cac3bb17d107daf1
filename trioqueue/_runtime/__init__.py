"""The trio runtime: it executes the decisions of ``trioqueue._core`` against a Backend.

``pool`` (the claim loop and the graceful shutdown), ``guard`` (renewal tasks and the
abandoned slot), ``batch`` (one task per batch, in one cancel scope), ``writer`` (the fenced
outcome writes), ``context`` (what a handler sees), ``monitor`` (blocking-call warnings) and
``config`` (``WorkerConfig`` and its checks), ``logfields`` (the fields of a log record about a job). It speaks only the Backend protocol
(``trioqueue._backends.interface``), never a concrete backend.
"""
