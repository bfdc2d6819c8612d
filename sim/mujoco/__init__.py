"""MuJoCo on CPU threads: batched backends (``backends``), the Warp GPU batch (``warp``), the
task base classes (``task_env``, ``instructed``) and the raw-throughput benchmark (``bench``)."""
