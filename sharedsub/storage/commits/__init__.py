"""The write seam of the group committer: the ``CommitStore`` and ``Appender`` protocols and the
Delta store (``commit_store``), the same in memory for tests (``memory_store``), appends done by a
child process (``append_process``) and the column lists handed to it (``py_columns``)."""
