"""MuJoCo on CPU threads: batched backends (``backends``), the Warp GPU batch (``warp``), the
task base classes (``task_env``, ``instructed``) and a backend's raw rate (``raw_rate``)."""
