"""workshop_lib's AWS side: request builders and flows against botocore stubs and moto, builds,
names, and the IAM policies and permission audit."""
