"""Storage boundary: Delta tables through delta-rs, their layout and schemas, and other files.

Only this package imports ``deltalake``; importing the package itself does not. One module per
concern, in four groups.

``storage.delta``: the project's own Delta protocol code, lowest first (each imports only modules
listed above it):

- ``tables``: where a table is and whether it is there: ``local_path`` (local path or URI),
  log file names, ``table_exists``, ``remove_table``, the table properties new tables get.
- ``log_snapshot``: local tables' snapshots read from ``_delta_log`` without delta-rs, as
  delta-rs would give them (``read_snapshot``; ``SnapshotCache`` and ``latest_snapshot`` for the
  latest, carried forward commit by commit; delta-rs for what it does not handle).
- ``commit_log``: reading the Delta log: ``read_commit``, ``file_changes``, ``latest_version``,
  ``MAINTENANCE_MARK``, table identity (``table_id``, ``TableIds``).
- ``table_reads``: table contents as Arrow: ``read_files``, ``snapshot_files``, ``read_table``,
  ``read_seqs``.
- ``blind_append``: the fast path of appends to an existing local table, without loading it
  (``FastPathAppender``).
- ``appender``: appends in this process: ``DeltaAppender``, commit ids (``COMMIT_MARK``),
  ``sync_commit``.
- ``table_maintenance``: maintenance writes (marked ``MAINTENANCE_MARK``): ``delete_rows``,
  ``compact``, ``vacuum``, ``checkpoint_and_clean_log``.
- ``table_history``: a table's retained history: ``history``, ``read_since``, ``append_restored``.

``storage.objects``: the object-store interface (get, head, list, put, put-if-absent,
put-if-match, delete) for every byte outside Delta's own API: ``store`` (the contract and its
errors), ``local_store`` (a directory), ``s3_store`` (an S3 bucket through obstore); ``open_store``.

``storage.cluster``: the objects members of a data dir on object storage share under
``_cluster/``: ``lease_objects`` (member slots' and the fan-out's leases: read, create, replace),
``presence`` (who has consumers of a subscription generation), ``owner_records`` (who dispatches
each of its topic partitions), ``claim_objects`` (names one member holds at a time: ClientIDs,
unshared durable subscriptions), ``record_keys`` (where those records are in a store).

``storage.commits``: the group committer's write seam:

- ``commit_store``: the narrow interface the committer writes through (``CommitStore``,
  ``Appender``) and its Delta implementation (``DeltaStore``, ``InProcessAppender``).
- ``append_process``: appends done by a child process (``AppendProcess``, ``ChildProcessAppender``).
- ``py_columns``: rows as column lists, converted to Arrow where they are committed.
- ``memory_store``: ``CommitStore`` in memory, with faults on demand, for tests of the runtime.

The domain's tables and files, on top of those:

- ``schemas``: the Arrow schemas of every table.
- ``topics``: topic tables: ``create_topic``, ``list_topics``, ``topic_exists``, ``last_seq``,
  their files' seq ranges (``topic_files``), a topic's partitions (``list_topic_partitions``,
  ``partition_starts``).
- ``topic_rows``: a group of published messages as the columns of one topic commit.
- ``payload_index``: payload lookup: ``TopicIndex`` (a topic's partitions), ``TableIndex``, ``read_messages``.
- ``catalog``: the subscription catalog table: appending records, reading them.
- ``backlog``: a subscription generation's backlog (routed minus settled).
- ``replay_tables``: a replay's reads and writes of a subscription table and its ack log.
- ``retention``: the fan-out's progress and topic/catalog retention on the tables.
- ``fanout_progress``: the fan-out's progress record on object storage (for retention).
- ``fanout_stats``: the fan-out's per-topic statistics file, and topic lag.
- ``parked_rows``: the fan-out's routed rows that could not be committed yet, on disk.
- ``ack_log_lock``: replays and maintenance's acknowledged-row deletes of one generation, one at a time.
- ``owner_only``: owner-only files: the data dir's mode, the process umask.
- ``diskspace``: whether a local data dir takes writes, and its free space.

Who appends (a published group's way to its topic table; acknowledgements and catalog
revisions take the same way)::

    Committer (sharedsub.runtime.committer)
      └─ CommitStore.appender(path)            commits.commit_store: DeltaStore
           ├─ InProcessAppender                 [storage] append_process = false
           │    └─ DeltaAppender                delta.appender
           └─ ChildProcessAppender              [storage] append_process = true (the default)
                └─ (pipe) append child ─ DeltaAppender
    DeltaAppender.append
      ├─ FastPathAppender.append                delta.blind_append: an existing local table
      └─ deltalake.write_deltalake              the first commit, other storage, changed metadata
    MemoryAppender                              commits.memory_store: tests of the committer

Whether a location is a local path or a URI is sharedsub.core.layout.local_path's rule.
"""
