"""The task table: tasks and handles in one on-demand DynamoDB table, shaped by the store's schema.

Its stream carries each write's new image to the supervisor (`infra/capabilities/supervisor.py`),
which makes the Step Functions calls the writes ask for. Its sparse `ActiveTasks` index holds only
active tasks (the store sets their lease and removes it on every terminal write); the sweeper
(`infra/capabilities/sweeper.py`) queries it for leases that ran out.
"""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from mcp_runtime.tasks import schema


class TaskTable(Construct):
    def __init__(self, scope: Construct, construct_id: str, *, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=schema.PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            # DynamoDB deletes expired items late; the store also filters on this attribute when reading.
            time_to_live_attribute=schema.TTL_ATTRIBUTE,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            # KMS key owned by the account (aws/dynamodb): auditable in CloudTrail, no key to manage.
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            deletion_protection=removal_policy == RemovalPolicy.RETAIN,
            removal_policy=removal_policy,
            stream=dynamodb.StreamViewType.NEW_IMAGE,
        )
        self.table.add_global_secondary_index(
            index_name=schema.OWNER_INDEX,
            partition_key=dynamodb.Attribute(name=schema.OWNER_INDEX_PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=schema.OWNER_INDEX_SORT_KEY, type=dynamodb.AttributeType.STRING),
            projection_type=dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=list(schema.OWNER_INDEX_ATTRIBUTES),
        )
        # Sparse: an item is in it only while it has a lease (active tasks). Sharded by task, so the
        # lease renewals of every task do not land on one partition. It projects what the sweeper reads.
        self.table.add_global_secondary_index(
            index_name=schema.ACTIVE_INDEX,
            partition_key=dynamodb.Attribute(name=schema.LEASE_SHARD_ATTRIBUTE, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=schema.LEASE_ATTRIBUTE, type=dynamodb.AttributeType.NUMBER),
            projection_type=dynamodb.ProjectionType.INCLUDE,
            non_key_attributes=list(schema.ACTIVE_INDEX_PROJECTION),
        )
