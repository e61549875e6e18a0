"""The workshop's client side: configuration, packaging, images, endpoints,
invocation, local rehearsal, benchmark and cleanup.

It runs where the participant sits (SageMaker Studio, a laptop, CI) and reaches
the decision adapter only over HTTP; it never imports the adapter's code.
"""

__version__ = "0.1.0"
