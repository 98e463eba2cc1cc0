"""The AMQP front end's wire: the event loop over sockets and proton's engines
(``engine_loop``), the listeners with TLS and SASL (``listener``), proton's events and transfers
read through Proton-C's C API (``proton_events``) and consumer sends through it (``outgoing``).
The rest of connectors/amqp handles what these deliver."""
