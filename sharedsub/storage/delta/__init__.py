"""The project's own Delta protocol code: where a table is (``tables``), its log read without
delta-rs (``log_snapshot``, ``commit_log``), its contents (``table_reads``, ``table_history``),
appends (``appender``, with the ``blind_append`` fast path) and maintenance writes
(``table_maintenance``). The package docstring of sharedsub.storage lists each module."""
