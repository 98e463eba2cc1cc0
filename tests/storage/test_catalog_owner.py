"""The catalog's ``owner`` column (sharedsub.core.security.permissions) on a catalog an earlier release made
without it: the next write adds the column, old rows read back with no owner."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa

from sharedsub.core import layout
from sharedsub.storage import catalog, schemas
from sharedsub.storage.delta.appender import DeltaAppender
from sharedsub.storage.delta.table_reads import read_table
from tests.builders import register, subscription

OLD_CATALOG = pa.schema([f for f in schemas.CATALOG if f.name != "owner"])


def test_an_older_catalog_gains_the_owner_column(tmp_path: Path) -> None:
    root = str(tmp_path)
    old = dataclasses.replace(subscription("t", name="old"), revision=1)
    row = {k: v for k, v in old.to_row().items() if k != "owner"}
    DeltaAppender(layout.catalog_table(root), OLD_CATALOG).append(pa.Table.from_pylist([row], schema=OLD_CATALOG))
    assert "owner" not in read_table(layout.catalog_table(root)).schema.names
    reader = catalog.CatalogReader(root)
    assert reader.refresh()[old.key].owner is None

    register(root, dataclasses.replace(subscription("t", name="new"), owner="alice"))

    records = {r.identity.name: r for r in catalog.load_catalog(root).values()}
    assert records["old"].owner is None
    assert records["new"].owner == "alice"
    assert "owner" in read_table(layout.catalog_table(root)).schema.names
    # A reader that had read the old version applies the commit that added the column.
    assert reader.refresh()[records["new"].key].owner == "alice"
