"""One module per API. Each module defines ``register(registry)`` (see
:mod:`broker.server.registry` for the handler signature and an example) and opens
with a header: versions served, behaviour, version notes. Modules whose name
starts with ``_`` are helpers and are not loaded as APIs.
"""
