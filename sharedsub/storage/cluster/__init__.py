"""The objects members of a data dir on object storage share, under ``_cluster/`` (the keys are
sharedsub.core.layout's; the rules sharedsub.core.ownership's): each one small JSON object,
written with the store's conditional puts, never with a lock.

- ``lease_objects``: lease objects (read, create, replace): member slots, the fan-out's.
- ``record_keys``: where these records are in a store (a data-dir-relative key under the data
  dir's own key; the names under a prefix).
- ``presence``: which members have consumers of a subscription generation.
- ``owner_records``: which member dispatches each topic partition of a subscription generation.
- ``claim_objects``: names one member holds at a time (a JMS ClientID, an unshared durable
  subscription's one consumer): create, read, replace, release.
"""
