"""The test suite, by the room it tests.

- ``tests/adapter/``: the decision adapter (``container/decision_adapter``), in process and as a real
  gunicorn process over HTTP; ``jev/`` its Jev System One API, ``security/`` hostile input, slow
  clients, faults, bounded work and its OpenAPI description.
- ``tests/workshop_lib/``: the client-side library; ``aws/`` its AWS requests and flows (botocore
  stubs, moto), builds, names and IAM policies, ``client/``, ``evaluation/``, and the CLI at the top.
- ``tests/container/``: what builds the image and the model package: the Dockerfiles, the buildspecs
  run with fakes, the lock file, the llama.cpp bindings proof, environment.yml. (Not ``build/``:
  pytest skips folders named ``build`` by default, which once left these tests uncollected.)
- ``tests/notebooks/``: the notebooks (static checks, outcomes, rehearsal, JupyterLab in a browser).
- ``tests/support/``: helpers the rooms share, imported (never taken from a conftest).

Fixtures live in ``tests/conftest.py``: the packaged model directory, an in-process engine, and
adapter processes from one pool (``adapters``: ``shared(**env)``, one process per distinct settings
for the session; ``fresh(...)`` for a test that breaks a server; ``adapter`` and ``start_adapter``
on top). Every test that uses a process-starting fixture is marked ``slow`` there, so
``pytest -m "not slow"`` is the quick in-process run.
"""
