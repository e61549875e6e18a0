"""What one API declares to the rest of the adapter: an ``Api`` record, one per API module.

The app, ``POST /invocations``, the metric line, nginx's configuration and the OpenAPI document learn
every API from these records (``registry.py`` lists them), never from a path written again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Blueprint

from .dialect import Dialect


@dataclass(frozen=True)
class Scope:
    """The paths whose errors (unmatched routes included) answer in an API's shape: ``path`` itself, and with
    ``under`` the paths below it; a path ending in ``/`` means everything below it."""

    path: str
    under: bool = False

    def matches(self, path: str) -> bool:
        if self.path.endswith("/"):
            return path.startswith(self.path)
        return path == self.path or (self.under and path.startswith(self.path + "/"))

    def nginx_pattern(self) -> str:
        """The same paths as a regular expression on nginx's ``$request_uri`` (query string included)."""
        if self.path.endswith("/"):
            return f"~^{self.path}"
        return f"~^{self.path}(?:[{'/' if self.under else ''}?]|$)"


@dataclass(frozen=True)
class Api:
    """One API: its bodies on ``/invocations``, its own routes, its error shape and its OpenAPI paths."""

    name: str  # what /invocations calls its bodies (request_kind)
    metric: str  # the metric line's api dimension
    body: Dialect | None = None  # how /invocations serves its bodies
    sniff: Callable[[dict[str, Any]], bool] | None = None  # whether a JSON object sent to /invocations is its body
    routes: tuple[str, ...] = ()  # its own routes, "METHOD /path"; a POST writes a metric line
    blueprint: Blueprint | None = None  # those routes
    scope: Scope | None = None  # the paths that answer in its error shape
    errors: Dialect | None = None  # the dialect whose error shape they answer in
    shape: str | None = None  # that shape's name among nginx's error pages (APIs may share one)
    openapi: Callable[[], dict[str, Any]] | None = (
        None  # its paths of the OpenAPI document (with apis/openapi_parts.py)
    )

    def __post_init__(self) -> None:
        if (self.body is None) != (self.sniff is None):
            raise ValueError(f"{self.name}: a body served on /invocations needs a sniffer, and a sniffer a body")
        if (self.scope is None) != (self.errors is None) or (self.scope is None) != (self.shape is None):
            raise ValueError(f"{self.name}: a scope needs its error dialect and shape name, and they a scope")
        if self.routes and self.blueprint is None:
            raise ValueError(f"{self.name}: routes need the blueprint that serves them")

    @property
    def served(self) -> Dialect:
        """The dialect that serves its bodies on /invocations (an API the registry's sniffing picked has one)."""
        if self.body is None:
            raise ValueError(f"{self.name} serves no bodies on /invocations")
        return self.body

    @property
    def error_scope(self) -> tuple[Scope, Dialect, str]:
        """Its scope, the dialect answering errors there and the shape's name (for an API that has a scope)."""
        if self.scope is None or self.errors is None or self.shape is None:
            raise ValueError(f"{self.name} owns no paths' error shape")
        return self.scope, self.errors, self.shape

    @property
    def posts(self) -> tuple[str, ...]:
        return tuple(route.split(" ", 1)[1] for route in self.routes if route.startswith("POST "))
