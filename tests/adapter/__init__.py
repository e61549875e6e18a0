"""Tests of the decision adapter (container/decision_adapter): in process on the embedded model,
and as a real gunicorn process over HTTP."""
