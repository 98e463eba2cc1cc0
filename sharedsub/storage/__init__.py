"""Storage boundary: table layout and schemas. ``sharedsub.storage.delta`` is the only Delta I/O.

Importing this package does not import deltalake; import ``sharedsub.storage.delta`` for I/O.
"""
