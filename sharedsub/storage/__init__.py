"""Storage boundary: Delta tables on disk through delta-rs, their layout and schemas.

Only this package imports ``deltalake``; importing the package itself does not. One module per
concern. The table modules, lowest first (each imports only table modules listed above it):

- ``tables``: where a table is and whether it is there: ``local_path`` (local path or URI),
  log file names, ``table_exists``, ``remove_table``, the table properties new tables get.
- ``log_snapshot``: local tables' snapshots read from ``_delta_log`` without delta-rs, as
  delta-rs would give them (``read_snapshot``; ``SnapshotCache`` and ``latest_snapshot`` for the
  latest, carried forward commit by commit; delta-rs for what it does not handle).
- ``commit_log``: reading the Delta log: ``read_commit``, ``file_changes``, ``latest_version``,
  ``MAINTENANCE_MARK``, table identity (``table_id``, ``TableIds``).
- ``table_reads``: table contents as Arrow: ``read_files``, ``snapshot_files``, ``read_table``,
  ``read_seqs``.
- ``topics``: topic tables: ``create_topic``, ``list_topics``, ``topic_exists``, ``last_seq``,
  their files' seq ranges (``topic_files``).
- ``appender``: writes: ``TableAppender``, commit ids (``COMMIT_MARK``), ``sync_commit``.
- ``blind_append``: appends to an existing local table without loading it (``BlindAppender``;
  ``TableAppender`` uses it).
- ``payload_index``: payload lookup: ``TopicIndex``, ``read_messages``.
- ``table_maintenance``: maintenance writes (marked ``MAINTENANCE_MARK``): ``delete_rows``,
  ``compact``, ``vacuum``, ``checkpoint_and_clean_log``.
- ``table_history``: a table's retained history: ``history``, ``read_since``, ``append_restored``.

Built on them, or beside them:

- ``schemas``: the Arrow schemas of every table.
- ``private``: owner-only files: the data dir's mode, the process umask.
- ``diskspace``: whether a local data dir takes writes, and its free space.
- ``catalog``: the subscription catalog table: appending records, reading them.
- ``backlog``: a subscription generation's backlog (routed minus settled).
- ``replay_tables``: a replay's reads and writes of a subscription table and its ack log.
- ``retention``: the fan-out's progress and topic/catalog retention on the tables.
- ``fanout_stats``: the fan-out's per-topic statistics file, and topic lag.
- ``append_process``: appends done by a child process (``RemoteAppender``).
- ``ack_log_lock``: replays and maintenance's acknowledged-row deletes of one generation, one at a time.
- ``commit_store``: the narrow interface the committer writes through (``CommitStore``,
  ``Appender``) and its Delta implementation (``DeltaStore``).
- ``memory_store``: ``CommitStore`` in memory, with faults on demand, for tests of the runtime.

Whether a location is a local path or a URI is sharedsub.core.layout.local_path's rule.
"""
