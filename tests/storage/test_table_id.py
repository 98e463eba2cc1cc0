"""Delta table identity (``metaData.id``): read, cached, and told apart after a drop and re-create."""

from __future__ import annotations

import os
from typing import Any

from deltalake import DeltaTable

from sharedsub.core import layout
from sharedsub.storage.delta.commit_log import TableIds, table_id
from sharedsub.storage.delta.tables import log_file, remove_table
from tests import builders as b


def test_table_id_is_the_delta_metadata_id_and_changes_when_the_table_is_created_again(tmp_path: Any) -> None:
    root = str(tmp_path)
    path = layout.topic_table(root, "t")
    assert table_id(path) is None
    b.publish(root, "t", ["k"])
    first = table_id(path)
    assert first == DeltaTable(path).metadata().id
    remove_table(path)
    assert table_id(path) is None
    b.topic(root, "t")
    assert table_id(path) not in (None, first)


def test_table_id_without_the_first_commit_file_comes_from_the_checkpoint(tmp_path: Any) -> None:
    root = str(tmp_path)
    path = layout.topic_table(root, "t")
    b.publish(root, "t", ["k"])
    expected = table_id(path)
    DeltaTable(path).create_checkpoint()
    os.remove(log_file(path, 0))
    assert table_id(path) == expected


def test_table_ids_cache_follows_a_drop_and_re_create(tmp_path: Any) -> None:
    root = str(tmp_path)
    path = layout.topic_table(root, "t")
    ids = TableIds()
    assert ids.get(path) is None
    b.publish(root, "t", ["k"])
    first = ids.get(path)
    assert first == table_id(path) and ids.get(path) == first
    remove_table(path)
    assert ids.get(path) is None
    b.topic(root, "t")
    second = ids.get(path)
    assert second == table_id(path) != first
    # Version 0 cleaned from the log: the cached id stands (no table load per lookup) ...
    DeltaTable(path).create_checkpoint()
    os.remove(log_file(path, 0))
    assert ids.get(path) == second
    # ... and a reload reads the checkpoint.
    assert ids.get(path, reload=True) == second
