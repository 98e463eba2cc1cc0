"""Rows handed to an appender as Python lists, one per column, not yet an Arrow table.

The committer's topic appends build their rows as column lists. Converting those to Arrow is the
biggest part of what a group commit costs the service's GIL (profiled: ~4 us per row inside the
service against ~1.4 us alone, the rows' objects being made by another thread on another core),
so an appender that commits in another process (sharedsub.storage.commits.append_process) takes the
lists as they are, pickled, and converts them there. Every other appender converts them with
:func:`as_table`, exactly as the committer did before.
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa


class PyColumns(NamedTuple):
    """Rows of ``schema``: ``columns`` maps each of its field names to a list, all one length,
    of values ``pa.Table.from_pydict`` takes for that field's type."""

    schema: pa.Schema
    columns: dict[str, list[object]]


def as_table(data: pa.Table | PyColumns) -> pa.Table:
    """``data`` as an Arrow table (a table is returned as it is).

    Raises:
        pyarrow.ArrowInvalid, pyarrow.ArrowTypeError: a value does not fit its column.
    """
    if isinstance(data, PyColumns):
        return pa.Table.from_pydict(data.columns, schema=data.schema)
    return data
