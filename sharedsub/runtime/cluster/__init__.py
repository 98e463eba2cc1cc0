"""The cluster: what a front end (and the fan-out job) runs to share a data dir with other
members (docs/design.md §8). Rules are in sharedsub.core.ownership, the objects' requests in
sharedsub.storage.cluster; nothing here touches AMQP (connectors.amqp.cluster_port is the front
end's side).

- ``data_dir_owner``: who owns a data dir: a local dir's ``flock``, a member slot's lease, the
  fan-out's lease (``DataDirLock``, ``own_data_dir``, ``own_fanout``).
- ``member_lease``: taking a lease or a member slot and renewing it on its own thread (``LeaseHolder``).
- ``cluster_status``: the members, the fan-out's lease and the topics' partitions, read from the
  store (``sharedsub cluster status``; ``read_member``).
- ``member_view``: the other members, advertised to clients for failover (``MemberView``).
- ``member_claims``: one connection per ClientID and one consumer of an unshared durable
  subscription across members (``MemberClaims``).
- ``peer_consumers``: the latest catalog and the other members' consumers, for attach and detach
  decisions (``PeerConsumers``).
- ``partition_owners``: the thread that decides which topic partitions of each subscription this
  member dispatches (``PartitionOwners``).
- ``membership``: the cluster part of a front end, built with its other parts: the above
  composed, started and stopped together (``Membership``, ``build_membership``).
"""
