"""The pure core: the rules of attach and detach, dispatch and outcomes, link names, selectors,
routing, admin, replay, SASL and permissions, and the settings.

Nothing here does I/O (the one exception is reading the packaged ``defaults.toml``, which
``config`` does when asked for the defaults): every module is tested as a table of inputs and
results, and tests/unit/test_layering.py checks that no import chain from here reaches an I/O
library, storage, the runtime or the adapters.
"""
