"""The workshop's client side: configuration, packaging, images, endpoints,
invocation, local rehearsal, benchmark and cleanup.

It runs where the participant sits (SageMaker Studio, a laptop, CI) and reaches
the decision adapter only over HTTP; it never imports the adapter's code.

From the notebooks down:

* ``steps`` (one module per notebook) and ``cli`` (one command per step): every
  step takes one ``steps.Workshop`` (config, clients for its mode, outputs);
* the flows against AWS: ``builds`` (CodeBuild, ECR), ``endpoints`` (SageMaker),
  ``images``, ``cleanup``, ``scaling``, ``transform``, ``policies``; what only AWS
  can do is a parameter, and ``stand_ins`` does it locally;
* the local rehearsal: ``rehearsal`` (emulator and endpoint processes), ``local``,
  ``permissions`` (every call recorded and audited against the policies);
* plumbing: ``config``, ``names`` (every naming rule), ``aws`` (the one client
  factory, request validation), ``errors``, ``models``, ``packaging``;
* the caller's side of an endpoint: ``client``, ``decisions``, ``display``, ``bench``.
"""

__version__ = "0.1.0"
