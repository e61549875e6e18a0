"""What runs against AWS: the request builders (checked by botocore before anything is sent), the IAM
policies, and the flows that send them (CodeBuild and ECR, SageMaker hosting, data capture, alarms,
updates, scaling, Batch Transform, the endpoint deadline, teardown).

``calls`` holds the one boto3 client factory and request validation; ``session`` the real-AWS mode and
``Clients``, a mode's clients for one region. The IAM documents are built by ``policies`` from
``policy_scope``, ``statements``, ``arns`` and the documents' own modules. The modules here import each
other and the bottom layer (``errors``, ``config``, ``names``, ``models``, ``packaging``), never
``workshop_lib.local``, ``client``, ``steps`` or anything above: what only AWS can do is a parameter
of a flow, and the local rehearsal passes its stand-in.
"""
