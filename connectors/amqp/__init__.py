"""The AMQP 1.0 front end of sharedsub (python-qpid-proton)."""
