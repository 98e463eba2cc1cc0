"""What every sharedsub process sets up for itself, whatever it runs (serve, frontend, the fan-out
job, the CLI): its output and its end.

- ``console``: lines written to stdout and stderr outside logging (the ready line among them):
  one write each, under one process-wide lock.
- ``logformat``: logging as ``[log]`` says (text or JSON), each record one line through ``console``.
- ``memprofile``: the opt-in memory profile (``SHAREDSUB_TRACEMALLOC_DIR``).
- ``process_exit``: ending a process once its clean shutdown is done.
"""
