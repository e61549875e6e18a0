"""The adapter's API dialects, one module each: its request and answer models (pydantic), how its
bodies become the engine's scoring items, how readouts become its answers, and its error shape.

* ``own``: this project's decision / shared-state batch on ``POST /invocations``
* ``sample``: the published SemIf sample's ``{"decision"}`` / ``{"decisions"}`` on ``/invocations``
* ``chat``: OpenAI chat completions on ``/invocations``
* ``systemone``: Jev System One (``POST /v1/systemone``, ``GET /v1/models``, and on ``/invocations``);
  ``systemone_answers`` describes its answers and errors
* ``decisions``: the OpenAI Decisions API (``POST /v1/decisions``, and on ``/invocations``)

``openapi`` builds the OpenAPI document from these models.
"""
