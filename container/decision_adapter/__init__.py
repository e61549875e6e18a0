"""Decision adapter: option scoring on llama.cpp behind Flask/gunicorn.

Runs inside the decision endpoint (the child image of the AWS llama.cpp DLC).
It never imports the workshop library; the two meet only over HTTP.
"""

__version__ = "0.1.0"
