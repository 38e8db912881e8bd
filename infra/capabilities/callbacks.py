"""The callback route: where an external system completes a task's `ctx.wait_for_callback`.

`POST /tasks/callbacks` on the HTTP API, served by a small function of its own. The route has no
JWT authorizer on purpose: the external system (a CI pipeline, a batch job, a person outside MCP)
holds no user token, and the body's single-use callback token is the credential, checked by a
conditional write against the hash the callback's record holds. The function may read and update
task items (not handles) and put large results in the payload bucket, nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aws_cdk import Duration
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_dynamodb as dynamodb
from constructs import Construct

from infra.capabilities._lambda import CALLBACK_HANDLER, FunctionDefaults, TableGrant, grant_table
from infra.nag import acknowledge
from mcp_runtime.tasks import schema

if TYPE_CHECKING:
    from infra.capabilities.payloads import TaskPayloads

CALLBACK_PATH = "/tasks/callbacks"
# A completion reads the task's items (the hot item and its parts, one BatchGetItem) and updates the
# callback's record on the work part and the effect on the hot item.
CALLBACK_TABLE_GRANTS: tuple[TableGrant, ...] = (
    TableGrant(
        ("dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:UpdateItem"),
        (schema.TASK_KEY_PREFIX, schema.PART_KEY_PREFIX),
    ),
)
CALLBACK_BUCKET_ACTIONS: tuple[str, ...] = ("s3:PutObject",)


class TaskCallbacks(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        defaults: FunctionDefaults,
        table: dynamodb.ITable,
        payloads: TaskPayloads,
        http_api: apigwv2.HttpApi,
        public_origin: str,
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = defaults.function(
            self,
            "Callbacks",
            description="Task callbacks: an external system completes a task's wait_for_callback with its token",
            handler=CALLBACK_HANDLER,
            memory_mb=512,
            timeout=Duration.seconds(10),
            environment={"TASK_PAYLOAD_BUCKET": payloads.bucket.bucket_name},
        )
        grant_table(self.function.role, CALLBACK_TABLE_GRANTS, table)
        payloads.grant(self.function.role, CALLBACK_BUCKET_ACTIONS)
        routes = http_api.add_routes(
            path=CALLBACK_PATH,
            methods=[apigwv2.HttpMethod.POST],
            integration=integrations.HttpLambdaIntegration("Callbacks", self.function.function),
        )
        acknowledge(
            routes[0],
            "AwsSolutions-APIG4",
            "External systems completing a task's callback hold no user token: the body's single-use 256-bit "
            "token is the credential, checked against the hash on the task item in the same conditional write.",
        )
        self.url = f"{public_origin}{CALLBACK_PATH}"  # the custom domain's, when there is one
