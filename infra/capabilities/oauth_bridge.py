"""The OAuth bridge in front of the Cognito user pool (auth=cognito): the authorization server MCP clients use.

Public routes on the same HTTP API as the MCP endpoint (so the bridge's issuer is the API's origin,
the one the protected resource metadata names with "self"): RFC 8414 metadata, its JWKS, RFC 7591
registration, the authorization, consent, callback (Cognito's only redirect target), token and
RFC 7009 revocation endpoints. Cognito only signs people in, through one app client of the bridge's
(made here, its one callback the bridge's on the configured public origin). The bridge mints the access
tokens with an asymmetric KMS key (RSA_2048, SIGN_VERIFY: the private key never leaves KMS; the API
reads the public key). A function of its own with its own role (its app client's secret, its key, items
of its own table), its table, and a cleanup (every 15 minutes) of clients nobody used for
`unusedClientDays` or that never completed a token exchange.
"""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.capabilities._lambda import BRIDGE_HANDLER, McpFunction
from infra.capabilities.http_front import QuickStartUserPool
from infra.config import AuthConfig
from infra.nag import acknowledge

# (method, path) of each public route; the function answers each (oauth_bridge/flows.py).
BRIDGE_ROUTES: tuple[tuple[apigwv2.HttpMethod, str], ...] = (
    (apigwv2.HttpMethod.GET, "/.well-known/oauth-authorization-server"),
    (apigwv2.HttpMethod.GET, "/.well-known/jwks.json"),
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
# What the bridge's code calls: its app client's secret (and the deletion of the per-client app clients
# earlier versions made), whether a person is still enabled, its keys, items of its table.
BRIDGE_COGNITO_ACTIONS: tuple[str, ...] = (
    "cognito-idp:DescribeUserPoolClient",
    "cognito-idp:DeleteUserPoolClient",
    "cognito-idp:AdminGetUser",  # a refresh checks the person is still enabled
)
BRIDGE_KEY_ACTIONS: tuple[str, ...] = ("kms:Sign", "kms:GetPublicKey")
BRIDGE_SEALING_ACTIONS: tuple[str, ...] = ("kms:Encrypt", "kms:Decrypt")
CALLBACK_PATH = "/oauth2/callback"
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
        # The origin the bridge names in its metadata, its callback and every redirect: from here, never from
        # a request's Host (the execute-api host and a custom domain are two origins of one API).
        self.public_origin = origin_of(resource_url) if resource_url else public_origin
        self.signing_key = kms.Key(
            self,
            "TokenSigningKey",
            description="Signs the OAuth bridge's access tokens (the private key never leaves KMS)",
            key_spec=kms.KeySpec.RSA_2048,
            key_usage=kms.KeyUsage.SIGN_VERIFY,
            removal_policy=removal_policy,
        )
        # Seals the HMAC keys of the consent forms and person cookies in the table (only the bridge may use it).
        self.sealing_key = kms.Key(
            self,
            "SealingKey",
            description="Seals the OAuth bridge's form and cookie keys in its table",
            enable_key_rotation=True,
            removal_policy=removal_policy,
        )
        # The bridge's one app client: Cognito signs people in for every MCP client through it, back to the
        # bridge's callback on the configured origin only. Its tokens only tell the bridge who signed in.
        self.app_client = pool.user_pool.add_client(
            "BridgeClient",
            generate_secret=True,
            auth_flows=cognito.AuthFlow(),
            o_auth=cognito.OAuthSettings(
                flows=cognito.OAuthFlows(authorization_code_grant=True),
                scopes=[cognito.OAuthScope.OPENID],
                callback_urls=[self.public_origin + CALLBACK_PATH],
            ),
            supported_identity_providers=[cognito.UserPoolClientIdentityProvider.COGNITO],
            prevent_user_existence_errors=True,
            access_token_validity=Duration.minutes(5),
            id_token_validity=Duration.minutes(5),
            refresh_token_validity=Duration.hours(1),
            enable_token_revocation=True,
        )
        environment = {
            "BRIDGE_TABLE_NAME": self.table.table_name,
            "BRIDGE_APP_CLIENT_ID": self.app_client.user_pool_client_id,
            "BRIDGE_SIGNING_KEY_ID": self.signing_key.key_id,
            "BRIDGE_SEALING_KEY_ID": self.sealing_key.key_id,
            "BRIDGE_USER_POOL_ID": pool.user_pool.user_pool_id,
            "BRIDGE_COGNITO_DOMAIN_URL": pool.domain_url,
            "BRIDGE_RESOURCE_SCOPE": pool.scope_name,
            "BRIDGE_EXTRA_SCOPES": "openid",
            "BRIDGE_REGISTRATIONS_PER_HOUR": str(auth.registrations_per_hour),
            "BRIDGE_REGISTRATION_BURST": str(auth.registration_burst),
            "BRIDGE_REGISTRATIONS_PER_HOST_PER_HOUR": str(auth.registrations_per_host_per_hour),
            "BRIDGE_CLIENTS_PER_PERSON_PER_HOUR": str(auth.clients_per_person_per_hour),
            "BRIDGE_UNUSED_CLIENT_DAYS": str(auth.unused_client_days),
            # No pydantic plugin ships in the asset: skip pydantic's scan for them (app/cold_start.py).
            "PYDANTIC_DISABLE_PLUGINS": "__all__",
        }
        if resource_url:
            environment["BRIDGE_RESOURCE_URL"] = resource_url
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
        self.function.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(BRIDGE_KEY_ACTIONS), resources=[self.signing_key.key_arn])
        )
        self.function.role.add_to_principal_policy(
            iam.PolicyStatement(actions=list(BRIDGE_SEALING_ACTIONS), resources=[self.sealing_key.key_arn])
        )
        integration = integrations.HttpLambdaIntegration("Bridge", self.function.function)
        # The sign-in routes, throttled apart from `/mcp` (HttpFront.throttle_routes).
        self.routes: list[apigwv2.HttpRoute] = []
        for method, path in BRIDGE_ROUTES:
            routes = http_api.add_routes(path=path, methods=[method], integration=integration)
            self.routes.extend(routes)
            acknowledge(
                routes[0],
                "AwsSolutions-APIG4",
                "An OAuth authorization server's metadata, registration, authorization and token endpoints are "
                "public by definition (RFC 8414, RFC 7591, RFC 6749): clients reach them before they hold a token. "
                "Registration is rate limited per address and per registrable domain and capped; each sign-in "
                "route has throttling limits of its own, and the bridge's reserved concurrency caps what it can take.",
            )
        self.cleanup = events.Rule(
            self,
            "Cleanup",
            description=(
                "Delete registered clients that never completed a token exchange within 30 minutes, "
                "or that no MCP client used for the configured number of days"
            ),
            schedule=events.Schedule.rate(Duration.minutes(CLEANUP_MINUTES)),
            targets=[
                targets.LambdaFunction(
                    self.function.function, event=events.RuleTargetInput.from_object({"action": "cleanup"})
                )
            ],
        )
        self.issuer = self.public_origin
        self.region = Stack.of(self).region

    def trust_from(self, api_function: lambda_.Function) -> None:
        """The API accepts the bridge's access tokens: its issuer, and the public key of its signing key."""
        api_function.add_environment("MCP_BRIDGE_ISSUER", self.issuer)
        api_function.add_environment("MCP_BRIDGE_SIGNING_KEY_ID", self.signing_key.key_id)
        api_function.add_to_role_policy(
            iam.PolicyStatement(actions=["kms:GetPublicKey"], resources=[self.signing_key.key_arn])
        )
