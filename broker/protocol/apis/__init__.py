"""Registry of every API schema, by api key. Each module here holds one API family."""

from __future__ import annotations

from ..schema import Api
from . import (acls, admin, cluster, controller, fetch, groups, offsets, produce, reassignment, share, telemetry,
               tokens, transactions)

SCHEMAS: dict[int, Api] = {}
for _module in (produce, fetch, offsets, cluster, controller, groups, admin, acls, reassignment,
                transactions, tokens, share, telemetry):
    for _api in _module.APIS:
        if _api.key in SCHEMAS:
            raise RuntimeError(f"api key {_api.key} defined twice")
        SCHEMAS[_api.key] = _api
del _module, _api
