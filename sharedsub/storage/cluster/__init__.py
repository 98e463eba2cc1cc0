"""The objects members of a data dir on object storage share, under ``_cluster/`` (the keys are
sharedsub.core.layout's; the rules sharedsub.core.ownership's): each one small JSON object,
written with the store's conditional puts, never with a lock.

- ``lease_objects``: lease objects (read, create, replace): member slots, the fan-out's.
- ``owner_records``: what members sharing a subscription write: consumer presence, dispatch owners.
"""
