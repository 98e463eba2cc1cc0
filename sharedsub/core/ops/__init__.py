"""Operating the service: counters and stage timings (``metrics``, ``stage_timing``), throttled
fault logging (``logthrottle``), and the rules of retention, replay and the admin operations
(``retention``, ``replay``, ``admin_rules``)."""
