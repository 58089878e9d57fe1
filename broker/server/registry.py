"""The API registry: which api keys and versions this broker serves, and by whom.

Adding an API is one new module in :mod:`broker.server.apis` (nothing else to
edit). The module defines a ``register(registry)`` function that calls
:meth:`ApiRegistry.register` for each key it serves::

    # broker/server/apis/create_topics.py
    from broker.protocol import ApiKey
    from broker.server.context import RequestContext

    async def handle(ctx: RequestContext, request: dict) -> dict | None:
        ...                      # ctx.broker.topics, ctx.broker.log_manager, ...
        return {"topics": [...]}

    def register(registry):
        registry.register(ApiKey.CREATE_TOPICS, 0, 5, handle)

:func:`load_apis` imports every module of the package and calls its
``register``. A handler receives the :class:`~broker.server.context.RequestContext`
(header, api version, the :class:`~broker.server.broker.Broker` with its config,
metadata, topic manager, log manager, purgatory and metrics) and the decoded
request body (a dict, every field present), and returns the response body dict
(missing keys take schema defaults) or ``None`` for no response (Produce with
acks=0). Response order on a connection is kept by the server, so handlers may
await freely.

Registering a key twice raises :class:`DuplicateApiError`. The ApiVersions
answer is :meth:`ApiRegistry.versions`: the registered ranges intersected with
the protocol schema ranges, so what we advertise is exactly what we serve.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, Awaitable, Callable

from broker.protocol import api_versions_table

if TYPE_CHECKING:
    from broker.server.context import RequestContext

Handler = Callable[["RequestContext", dict], Awaitable["dict | None"]]


class DuplicateApiError(ValueError):
    """An api key was registered twice."""


@dataclass(frozen=True, slots=True)
class ApiHandler:
    api_key: int
    min_version: int
    max_version: int
    handler: Handler
    name: str

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


class ApiRegistry:
    """api key -> :class:`ApiHandler`; see the module docstring."""

    def __init__(self) -> None:
        self._handlers: dict[int, ApiHandler] = {}

    def register(self, api_key: int, min_version: int, max_version: int, handler: Handler) -> None:
        api_key = int(api_key)
        if api_key in self._handlers:
            raise DuplicateApiError(f"api key {api_key} is already registered by {self._handlers[api_key].handler}")
        schema = api_versions_table().get(api_key)
        if schema is None:
            raise ValueError(f"api key {api_key} has no protocol schema")
        low, high = max(min_version, schema[0]), min(max_version, schema[1])
        if low > high:
            raise ValueError(f"api key {api_key}: versions {min_version}-{max_version} outside schema {schema}")
        self._handlers[api_key] = ApiHandler(api_key, low, high, handler, api_name(api_key))

    def unregister(self, *api_keys: int) -> None:
        """Stop serving (and advertising) ``api_keys`` (a feature turned off by configuration)."""
        for api_key in api_keys:
            self._handlers.pop(int(api_key), None)

    def get(self, api_key: int) -> ApiHandler | None:
        return self._handlers.get(api_key)

    def versions(self) -> dict[int, tuple[int, int]]:
        """What ApiVersions advertises: api key -> (min, max), sorted by key."""
        return {k: (h.min_version, h.max_version) for k, h in sorted(self._handlers.items())}

    def __contains__(self, api_key: int) -> bool:
        return api_key in self._handlers

    def __len__(self) -> int:
        return len(self._handlers)


def api_name(api_key: int) -> str:
    """Kafka's name of an api key (``Produce``, ``ApiVersions``...), for logs and metric labels."""
    from broker.protocol.apis import SCHEMAS

    api = SCHEMAS.get(api_key)
    return api.name if api is not None else f"ApiKey{api_key}"


def load_apis(registry: ApiRegistry | None = None) -> ApiRegistry:
    """Import every module in :mod:`broker.server.apis` and let it register its handlers."""
    from broker.server import apis

    registry = registry or ApiRegistry()
    for info in sorted(pkgutil.iter_modules(apis.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{apis.__name__}.{info.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(registry)
    return registry
