"""Values the AWS tests share."""

REGION = "us-east-1"
ROLE = "arn:aws:iam::123456789012:role/service-role/WorkshopSageMakerRole"
DIGEST = "sha256:" + "ab" * 32
DLC_PINNED = f"763104351884.dkr.ecr.{REGION}.amazonaws.com/llama-cpp@{DIGEST}"
DECISION_PINNED = f"123456789012.dkr.ecr.{REGION}.amazonaws.com/sagemaker-decision-workshop@{DIGEST}"
MODEL_DATA = "s3://decision-workshop-test/decision-workshop/model/model.tar.gz"
