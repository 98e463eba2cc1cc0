"""The service runtime: the threads and processes of a running service and the file-backed state
they keep (group committer, tailer, maintenance, the fan-out child's supervisor, discovery through
``_service.json``, the users and permissions files, read-only inspection of the tables).

``sharedsub.runtime.cluster`` holds what a member runs to share a data dir with others (the data
dir's owner and the member leases, claims, the other members' consumers, partition owners,
cluster status); ``sharedsub.runtime.process`` what every process sets up for itself (its
output lines and logging, the memory profile, its exit). Their docstrings list their modules.

It uses the core's rules and the storage package; the adapters (connectors/) and the entry points
(sharedsub.cli, sharedsub.serve) use it, never the other way round (tests/unit/test_layering.py).
"""
