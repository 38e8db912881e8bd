"""The payload bucket: task results and durable records too large for the task item.

Private, encrypted (SSE-S3), TLS only, versioning off (every object is written once), and a
lifecycle that deletes the objects under `tasks/` a day after the task's TTL, so a payload never
outlives its task by more than that. A task without a TTL (`TASK_DEFAULT_TTL_MS=none`) keeps its item
for ever, so the runtime writes its objects under `kept/`, which no rule expires
(`mcp_runtime.tasks.payloads`). The functions get exactly what their code calls, on those two
prefixes only.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from infra.nag import acknowledge

EXPIRING_PREFIX = "tasks/"
KEPT_PREFIX = "kept/"
PREFIXES = (EXPIRING_PREFIX, KEPT_PREFIX)


class TaskPayloads(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, task_ttl_hours: int, removal_policy: RemovalPolicy
    ) -> None:
        super().__init__(scope, construct_id)
        self.expiration_days = -(-task_ttl_hours // 24) + 1
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="expire-with-the-task",
                    prefix=EXPIRING_PREFIX,
                    expiration=Duration.days(self.expiration_days),
                    abort_incomplete_multipart_upload_after=Duration.days(1),
                )
            ],
            removal_policy=removal_policy,
        )
        acknowledge(
            self.bucket,
            "AwsSolutions-S1",
            "Only the stack's own functions read and write this bucket, each object once, under the task's id; "
            "CloudTrail data events cover access auditing where wanted, without a second bucket for access logs.",
        )

    @property
    def objects_arns(self) -> list[str]:
        return [self.bucket.arn_for_objects(f"{prefix}*") for prefix in PREFIXES]

    def grant(self, role: iam.IRole, actions: tuple[str, ...]) -> None:
        role.add_to_principal_policy(iam.PolicyStatement(actions=list(actions), resources=self.objects_arns))
        stack = Stack.of(self)
        bucket_id = stack.resolve(stack.get_logical_id(self.bucket.node.default_child))  # type: ignore[arg-type]
        for prefix in PREFIXES:
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::<{bucket_id}.Arn>/{prefix}*]",
                f"Objects are named by task id at run time; the grant covers this bucket's {prefix} prefix only.",
            )
