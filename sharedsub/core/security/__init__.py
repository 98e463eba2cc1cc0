"""Security: SASL (``sasl_rules``, ``sasl_frames``, ``scram``), who authenticated on a connection
(``authenticated``), what each user may do (``permissions``) and which listeners are exposed how
(``exposure``)."""
