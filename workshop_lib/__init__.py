"""The workshop's client side: configuration, the flows against AWS, their local stand-ins, the
endpoint client, the benchmark, and the notebooks' steps.

It runs where the participant sits (SageMaker Studio, a laptop, CI) and reaches the decision adapter
only over HTTP; it never imports the adapter's code.

By concern, from the bottom up (a module imports only from its own layer or the ones below):

1. ``errors`` (the one base ``WorkshopError`` and the kinds callers tell apart), then ``config``
   (``WorkshopConfig``, each setting declared once), ``names`` (every naming rule), ``models`` (the
   pinned and embedded models) and ``packaging`` (``model.tar.gz`` and its manifest);
2. ``aws/``: what runs against AWS: the request builders, the IAM policies and the flows that send
   them; ``client/``: the caller's side of an endpoint (``EndpointClient``, its transports and errors,
   the Jev and OpenAI Decisions helpers, ``policy``), which uses only ``aws.calls``'s client factory;
3. ``local/``: what stands in for AWS on this machine (the emulator, the local endpoints and their
   registry, the stand-ins, the permission audit, and the choice of mode); ``evaluation/``: decisions measured
   against labelled tasks (the notebooks' benchmark and calibration fit);
4. ``display`` and ``examples``; ``steps/`` (one module per notebook), on top of everything above;
5. ``widgets`` (the notebooks' input widgets), ``demo`` and the command line (``cli``,
   ``cli_commands``: one command per step).
"""

__version__ = "0.1.0"
