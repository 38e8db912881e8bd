"""The OAuth bridge in front of the Cognito user pool (auth=cognito): what MCP clients need to sign in.

Public routes on the same HTTP API as the MCP endpoint (so the bridge's issuer is the API's origin,
the one the protected resource metadata names with "self"): RFC 8414 metadata, RFC 7591
registration, the authorization, consent, callback (Cognito's only redirect target), token and
RFC 7009 revocation endpoints. A function of its own with its own role
(app clients of this pool, items of its own table), its table, and a cleanup (every 15 minutes) of clients
nobody used for `unusedClientDays` or that never completed a token exchange, and
an alarm on the client slots used.
"""

from __future__ import annotations

import math

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.capabilities._lambda import BRIDGE_HANDLER, McpFunction
from infra.capabilities.http_front import QuickStartUserPool
from infra.config import AuthConfig
from infra.nag import acknowledge

# (method, path) of each public route; the function answers each (oauth_bridge/flows.py).
BRIDGE_ROUTES: tuple[tuple[apigwv2.HttpMethod, str], ...] = (
    (apigwv2.HttpMethod.GET, "/.well-known/oauth-authorization-server"),
    (apigwv2.HttpMethod.POST, "/oauth2/register"),
    (apigwv2.HttpMethod.GET, "/oauth2/authorize"),
    (apigwv2.HttpMethod.POST, "/oauth2/token"),
    (apigwv2.HttpMethod.GET, "/oauth2/consent"),
    (apigwv2.HttpMethod.POST, "/oauth2/consent"),
    (apigwv2.HttpMethod.GET, "/oauth2/callback"),
    (apigwv2.HttpMethod.POST, "/oauth2/revoke"),
)
# How often the cleanup runs (oauth_bridge.flows.CLEANUP_MINUTES): a client that never exchanged a
# token is deleted 30 to 45 minutes after it registered.
CLEANUP_MINUTES = 15
SLOTS_ALARM_PERCENT = 80
# What the bridge's code calls: app clients of this user pool, items of its table.
BRIDGE_COGNITO_ACTIONS: tuple[str, ...] = (
    "cognito-idp:CreateUserPoolClient",
    "cognito-idp:DeleteUserPoolClient",
)
BRIDGE_TABLE_ACTIONS: tuple[str, ...] = (
    "dynamodb:GetItem",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:Scan",
)


def origin_of(url: str) -> str:
    """`https://host[:port]` of an https URL (the endpoint's resource URI under a custom domain)."""
    scheme, _, rest = url.partition("://")
    return f"{scheme}://{rest.split('/', 1)[0]}"


class OAuthBridge(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        code: lambda_.Code,
        http_api: apigwv2.HttpApi,
        public_origin: str,
        pool: QuickStartUserPool,
        auth: AuthConfig,
        resource_url: str | None,
        log_retention_days: int,
        removal_policy: RemovalPolicy,
        metrics_namespace: str,
        reserved_concurrency: int | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Registrations",
            partition_key=dynamodb.Attribute(name="pk", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            time_to_live_attribute="expiresAt",  # the per-address registration counters
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            removal_policy=removal_policy,
        )
        environment = {
            "BRIDGE_TABLE_NAME": self.table.table_name,
            "BRIDGE_USER_POOL_ID": pool.user_pool.user_pool_id,
            "BRIDGE_COGNITO_DOMAIN_URL": pool.domain_url,
            "BRIDGE_RESOURCE_SCOPE": pool.scope_name,
            "BRIDGE_EXTRA_SCOPES": "openid",
            "BRIDGE_REGISTRATIONS_PER_HOUR": str(auth.registrations_per_hour),
            "BRIDGE_REGISTRATION_BURST": str(auth.registration_burst),
            "BRIDGE_REGISTRATIONS_PER_HOST_PER_HOUR": str(auth.registrations_per_host_per_hour),
            "BRIDGE_METRICS_NAMESPACE": metrics_namespace,
            "BRIDGE_MAX_CLIENTS": str(auth.max_registered_clients),
            "BRIDGE_UNUSED_CLIENT_DAYS": str(auth.unused_client_days),
            # No pydantic plugin ships in the asset: skip pydantic's scan for them (app/cold_start.py).
            "PYDANTIC_DISABLE_PLUGINS": "__all__",
        }
        if resource_url:
            environment["BRIDGE_RESOURCE_URL"] = resource_url
        # The origin the bridge names in its metadata, its callback and every redirect: from here, never from
        # a request's Host (the execute-api host and a custom domain are two origins of one API).
        self.public_origin = origin_of(resource_url) if resource_url else public_origin
        environment["BRIDGE_PUBLIC_ORIGIN"] = self.public_origin
        self.function = McpFunction(
            self,
            "Bridge",
            description="OAuth bridge: authorization server metadata, client registration and sign-in for MCP clients",
            handler=BRIDGE_HANDLER,
            code=code,
            memory_mb=512,
            timeout=Duration.seconds(15),
            environment=environment,
            log_retention_days=log_retention_days,
            removal_policy=removal_policy,
            reserved_concurrency=reserved_concurrency,
        )
        self.function.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(BRIDGE_COGNITO_ACTIONS), resources=[pool.user_pool.user_pool_arn])
        )
        self.function.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(BRIDGE_TABLE_ACTIONS), resources=[self.table.table_arn])
        )
        integration = integrations.HttpLambdaIntegration("Bridge", self.function.function)
        for method, path in BRIDGE_ROUTES:
            routes = http_api.add_routes(path=path, methods=[method], integration=integration)
            acknowledge(
                routes[0],
                "AwsSolutions-APIG4",
                "An OAuth authorization server's metadata, registration, authorization and token endpoints are "
                "public by definition (RFC 8414, RFC 7591, RFC 6749): clients reach them before they hold a token. "
                "Registration is rate limited per address and per registrable domain and capped; the stage throttles "
                "every route, and the bridge's reserved concurrency caps what it can take.",
            )
        self.cleanup = events.Rule(
            self,
            "Cleanup",
            description=(
                "Delete app clients that never completed a token exchange within 30 minutes, "
                "or that no MCP client used for the configured number of days"
            ),
            schedule=events.Schedule.rate(Duration.minutes(CLEANUP_MINUTES)),
            targets=[
                targets.LambdaFunction(
                    self.function.function, event=events.RuleTargetInput.from_object({"action": "cleanup"})
                )
            ],
        )
        # The bridge writes RegisteredClients (EMF) on every new client and every cleanup run.
        self.slots_alarm = cloudwatch.Alarm(
            self,
            "RegisteredClientsHigh",
            alarm_description=(
                f"The OAuth bridge holds {SLOTS_ALARM_PERCENT}% or more of its {auth.max_registered_clients} client "
                "slots: new clients will soon get 429 (registrations flooded, or maxRegisteredClients too low)"
            ),
            metric=cloudwatch.Metric(
                namespace=metrics_namespace,
                metric_name="RegisteredClients",
                period=Duration.minutes(CLEANUP_MINUTES),
                statistic="Maximum",
            ),
            threshold=math.ceil(auth.max_registered_clients * SLOTS_ALARM_PERCENT / 100),
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.issuer = self.public_origin
        self.region = Stack.of(self).region
