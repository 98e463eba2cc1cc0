"""The fan-out's rules: routing a batch to subscriptions (``routing``, over ``binding`` patterns
and the compiled selectors of sharedsub.core.selector), why a message was or was not routed
(``explain``), and the job's fault and pacing rules (``fanout_faults``, ``fanout_pacing``)."""
