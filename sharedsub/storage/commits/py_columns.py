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
    """``data`` as an Arrow table (a table is returned as it is): the table
    ``pa.Table.from_pydict(data.columns, schema=data.schema)`` makes.

    A column of nulls alone is made as such, without converting its values: most of a topic
    row's 25 columns are null in most messages (no group, no reply-to, ...), and
    ``from_pydict`` took ~170 us for a one-row topic commit against ~60 us so (bench/RESULTS.md,
    issue 43, "files made ahead"), on a synchronous publisher's path.

    Raises:
        pyarrow.ArrowInvalid, pyarrow.ArrowTypeError: a value does not fit its column, or the
            columns differ in length.
    """
    if not isinstance(data, PyColumns):
        return data
    arrays = []
    for field in data.schema:
        values = data.columns[field.name]
        if all(value is None for value in values):
            arrays.append(pa.nulls(len(values), field.type))
        else:
            arrays.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(arrays, schema=data.schema)
