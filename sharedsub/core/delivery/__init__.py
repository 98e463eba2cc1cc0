"""Delivery: dispatch of a subscription's rows to its consumer links (``dispatch``, the decision
table), what each outcome does (``outcomes``), the acknowledged seqs kept in memory
(``acked_seqs``), the ack log's reading (``acklog``) and local transactions (``transactions``)."""
