"""Two front ends on one bucket (issue 30), as the tests and bench/cluster_compare.py run them:
their settings, and waiting until a given member dispatches a partition of a subscription."""

from __future__ import annotations

from sharedsub.core import layout
from sharedsub.storage.cluster.owner_records import read_owners
from sharedsub.storage.objects import open_store
from tests.amqp_peer import wait_for

# Two member slots; short readings and drains, so hand-overs take about a second.
MEMBERS = {"SHAREDSUB_CLUSTER_MAX_MEMBERS": "2", "SHAREDSUB_CLUSTER_INTERVAL": "0.5", "SHAREDSUB_CLUSTER_DRAIN_TIMEOUT": "2"}


def dispatcher(data: str, name: str, partition: int) -> int | None:
    """The member slot that dispatches ``partition`` of generation 1 of the global shared durable
    subscription ``name`` (its owner record), None while nobody does."""
    key = layout.subscription_key("global", name, shared=True, durable=True)
    found = read_owners(open_store(data), "", key, 1).get(partition)
    return None if found is None or found[0].released else found[0].slot


def wait_for_owner(data: str, name: str, partition: int, slot: int) -> None:
    """Until member ``slot`` dispatches ``partition`` of that subscription: messages published
    before that may go to either member."""
    wait_for(lambda: dispatcher(data, name, partition) == slot, 60, f"member {slot} to dispatch partition {partition}")
