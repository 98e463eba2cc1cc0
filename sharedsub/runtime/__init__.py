"""The service runtime: the threads and processes of a running service and the file-backed state
they keep (group committer, maintenance, the fan-out child's supervisor, discovery through
``_service.json``, the users and permissions files, read-only inspection of the tables).

It uses the core's rules and the storage package; the adapters (connectors/) and the entry points
(sharedsub.cli, sharedsub.serve) use it, never the other way round (tests/unit/test_layering.py).
"""
