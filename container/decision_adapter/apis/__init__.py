"""The adapter's API dialects, one module each: its request and answer models (pydantic), how its
bodies become the core's questions (questions.py), how the core's answers become its answers, and its
error shape, declared as a ``Dialect`` that ``dialect.py`` serves like every other.

* ``own``: this project's decision / shared-state batch on ``POST /invocations``
* ``sample``: the published SemIf sample's ``{"decision"}`` / ``{"decisions"}`` on ``/invocations``
  (own's decisions in the sample's envelope)
* ``chat``: OpenAI chat completions (``POST /v1/chat/completions``, streamed or not, and on ``/invocations``)
* ``systemone``: Jev System One (``POST /v1/systemone``, ``GET /v1/models``, and on ``/invocations``);
  ``systemone_requests`` holds its request models and validation errors, ``systemone_answers``
  describes its answers and errors
* ``decisions``: the OpenAI Decisions API (``POST /v1/decisions``, and on ``/invocations``)
* ``invocations``: ``POST /invocations``, dispatching on the body's shape

Each declares itself once, as an ``Api`` record (``api``: its bodies' sniffer, routes, metric name and
error shape, OpenAPI paths), and ``registry`` lists them for the app, ``/invocations``, the metric line,
nginx and the OpenAPI document (``openapi_parts``: what the API's parts of that document share).

What they share: ``dialect`` (serving, routes, error responses), ``common`` (parsing helpers, request
ids), ``answers`` (answer models of the decision APIs), ``typed`` (System One's and the OpenAI
Decisions API's model names and confidence formulas). ``openapi`` builds the OpenAPI document from
the models.
"""
