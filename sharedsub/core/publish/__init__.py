"""Publish: a transfer decoded and checked (``amqp_message``, on ``amqp_types``, ``amqp_walk``,
``amqp_sections``, ``header_properties``, ``proton_fields``, ``application_properties`` and
``proton_values``), the topic row built from it (``topic_row``), the bytes in flight to the
committer (``publish_window``), and what a write the data dir cannot take does (``write_faults``)."""
