"""The fan-out's sources of topic rows, one per ``[fanout] source``:

- ``deltars_topics`` (``deltars``, the default): the ``sharedsub_topics`` Spark Python Data
  Source over delta-rs, one query over every topic (offset = each topic's Delta version), and
  the driver-side reader of a micro-batch's rows (``[fanout] driver_reads``).
- ``delta_streaming`` (``delta``): Delta's own streaming source through the Delta Lake Spark
  connector (jobs/delta_jars.py), one query per topic, presented as one query.
"""
