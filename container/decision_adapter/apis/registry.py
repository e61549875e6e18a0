"""The adapter's APIs, listed once (``DIALECTS``): the app, ``/invocations``, the metric line, nginx's
configuration and the OpenAPI document iterate it, so a new API is a module with its ``Api`` record and a
line here.

The list's order is ``/invocations``' sniffing order: the first API whose sniffer takes a body serves it
(chat's ``messages`` first; this project's ``question`` / ``questions`` last, as the least specific).
Where the APIs' routes are written out (the 404 message, nginx's access-log map, the OpenAPI paths) they
are sorted by path from z to a (the 404 message and the OpenAPI paths: POSTs first), and so are the
error shapes' scopes: in that order a path comes before every path that begins it, so the first scope
that matches is the narrowest.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from flask import Blueprint

from . import chat, decisions, own, sample, systemone
from .api import Api
from .dialect import Dialect

INVOCATIONS = "/invocations"
FIRST_ROUTES = ("GET /ping", f"POST {INVOCATIONS}")  # SageMaker's, served by the app and invocations.py
META_ROUTES = ("GET /status", "GET /openapi.json")  # the app's own, not named by nginx's 404


def _descending(routes: Iterable[str]) -> list[str]:
    return sorted(routes, key=lambda route: route.split(" ", 1)[-1], reverse=True)


@dataclass(frozen=True)
class Registry:
    apis: tuple[Api, ...]

    def __post_init__(self) -> None:
        names = [api.name for api in self.apis]
        paths = [route.split(" ", 1)[1] for api in self.apis for route in api.routes]
        for what, seen in (("name", names), ("route path", paths)):
            twice = {item for item in seen if seen.count(item) > 1}
            if twice:
                raise ValueError(f"two APIs declare the {what} {sorted(twice)[0]}")

    def sniff(self, body: dict[str, Any]) -> Api | None:
        """The API whose body this JSON object is on /invocations, or None."""
        return next((api for api in self.apis if api.sniff is not None and api.sniff(body)), None)

    def scopes(self) -> list[Api]:
        """The APIs that own paths' error shapes, narrowest scope first."""
        return sorted(
            (api for api in self.apis if api.scope is not None), key=lambda api: api.error_scope[0].path, reverse=True
        )

    def scoped(self, path: str) -> Dialect | None:
        """The dialect whose error shape ``path`` answers in (None: the project's)."""
        return next((api.error_scope[1] for api in self.scopes() if api.error_scope[0].matches(path)), None)

    def metric(self, path: str) -> str | None:
        """The metric line's api name for a POST to ``path``: None for /invocations (its body says) and for
        paths that write no metric line."""
        return next((api.metric for api in self.apis if path in api.posts), None)

    def metered(self, path: str) -> bool:
        return path == INVOCATIONS or self.metric(path) is not None

    def is_api_path(self, path: str) -> bool:
        """Whether answers on ``path`` carry a request id: /invocations and every API's paths."""
        return path == INVOCATIONS or self.scoped(path) is not None or path in self.paths()

    def routes(self, *, meta: bool = True) -> list[str]:
        """Every route, "METHOD /path": SageMaker's, the APIs' (POSTs, then GETs), then the app's own."""
        own = [route for api in self.apis for route in api.routes]
        posts = _descending(route for route in own if route.startswith("POST "))
        others = _descending(route for route in own if not route.startswith("POST "))
        return [*FIRST_ROUTES, *posts, *others, *(META_ROUTES if meta else ())]

    def described(self, *, meta: bool = True) -> str:
        """The routes as a 404 names them: "GET /ping, POST /invocations, ... or GET /openapi.json"."""
        routes = self.routes(meta=meta)
        return f"{', '.join(routes[:-1])} or {routes[-1]}"

    def paths(self) -> list[str]:
        """The APIs' own paths, from z to a."""
        return sorted({route.split(" ", 1)[1] for api in self.apis for route in api.routes}, reverse=True)

    def shapes(self) -> dict[str, Dialect]:
        """Each error shape's name (nginx's error pages) and a dialect that answers in it."""
        found: dict[str, Dialect] = {}
        for api in self.scopes():
            _, errors, shape = api.error_scope
            found.setdefault(shape, errors)
        return dict(sorted(found.items(), reverse=True))

    def openapi_paths(self) -> dict[str, Any]:
        """The APIs' paths of the OpenAPI document, in ``routes()``' order."""
        parts = {path: item for api in self.apis if api.openapi is not None for path, item in api.openapi().items()}
        order = [route.split(" ", 1)[1] for route in self.routes(meta=False)]
        return {path: parts[path] for path in dict.fromkeys(order) if path in parts}

    def blueprints(self) -> list[Blueprint]:
        return [api.blueprint for api in self.apis if api.blueprint is not None]


DIALECTS = Registry((chat.API, sample.API, systemone.API, decisions.API, own.API))
