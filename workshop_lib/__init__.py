"""The workshop's client side: configuration, packaging, images, endpoints,
invocation, local rehearsal, benchmark and cleanup.

It runs where the participant sits (SageMaker Studio, a laptop, CI) and reaches
the decision adapter only over HTTP; it never imports the adapter's code.

From the notebooks down:

* ``steps`` (one module per notebook) and ``cli`` / ``cli_commands`` (one command per step): every
  step takes one ``steps.Workshop`` (config, the mode chosen when it loads, outputs); ``widgets``
  holds the notebooks' input widgets;
* the mode (``modes``): AWS or the local rehearsal supplies the clients, the build runner and the
  hosting; what only AWS can do is a parameter of the flows, and ``stand_ins`` does it locally;
* the flows against AWS: ``build_requests`` / ``builds`` (CodeBuild, ECR), ``deploy_spec`` (one
  deploy, specified once), ``endpoints`` (the request builders and plans), ``hosting`` (sending,
  waiting, logs), ``instance_types``, ``images``, ``cleanup``, ``scaling``, ``transform``,
  ``policies`` (the IAM documents) and ``iam`` (IAM's grammar and an offline evaluator);
* the local rehearsal: ``rehearsal`` (the registry of local processes), ``local``, ``dlc_server``,
  ``permissions`` (every call recorded and audited against the policies);
* plumbing: ``config`` and ``config_checks``, ``names`` (every naming rule), ``aws`` (the one client
  factory, request validation), ``errors``, ``models``, ``packaging``;
* the caller's side of an endpoint: ``client`` (with ``transport`` and ``endpoint_errors``),
  ``decisions``, ``display``, ``evaluation``.
"""

__version__ = "0.1.0"
