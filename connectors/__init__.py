"""sharedsub's front ends: the AMQP 1.0 service (connectors.amqp) and its HTTP endpoint (connectors.http)."""
