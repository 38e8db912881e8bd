"""The HTTP front: `/mcp` on an API Gateway HTTP API behind a JWT authorizer, and optionally a
Lambda Function URL with AWS_IAM auth. Both deliver payload 2.0 events to the same API function.

`POST /mcp` carries every JSON-RPC message; `GET /mcp` (resume an event stream with Last-Event-ID)
and `DELETE /mcp` (end a session) serve handshake-era (2025) clients, behind the same authorizer.
"""

from __future__ import annotations

import json

import jsii
from aws_cdk import Duration, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_authorizers as authorizers
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.capabilities.functions import retention
from infra.nag import acknowledge

MCP_PATH = "/mcp"
MCP_METHODS = ("POST", "GET", "DELETE")
# OAuth 2.0 Protected Resource Metadata (RFC 9728): public, so a client can find the issuer.
METADATA_PATHS = ("/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp")
RESOURCE_SERVER_ID = "mcp"
INVOKE_SCOPE = "invoke"
# Headers a browser client sends to an MCP endpoint (only used when CORS origins are configured).
MCP_REQUEST_HEADERS = (
    "authorization",
    "content-type",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "mcp-session-id",
    "last-event-id",
)
# A browser client must be able to read the session id that `initialize` returns.
MCP_RESPONSE_HEADERS = ("mcp-session-id",)
_ACCESS_LOG_FIELDS = {
    "requestId": "$context.requestId",
    "ip": "$context.identity.sourceIp",
    "requestTime": "$context.requestTime",
    "routeKey": "$context.routeKey",
    "status": "$context.status",
    "responseLength": "$context.responseLength",
    "integrationLatency": "$context.integrationLatency",
    "integrationError": "$context.integrationErrorMessage",
    "authorizerError": "$context.authorizer.error",
    "principal": "$context.authorizer.claims.sub",
}


@jsii.implements(apigwv2.IAccessLogSettings)
class JsonAccessLogs:
    """One JSON line per request: who, what route, which status, and why auth or the integration failed."""

    def __init__(self, log_group: logs.ILogGroup) -> None:
        self._destination = apigwv2.LogGroupLogDestination(log_group)

    @property
    def destination(self) -> apigwv2.IAccessLogDestination:
        return self._destination

    @property
    def format(self) -> apigw.AccessLogFormat:
        return apigw.AccessLogFormat.custom(json.dumps(_ACCESS_LOG_FIELDS, separators=(",", ":")))


class QuickStartUserPool(Construct):
    """A Cognito user pool whose app client gets tokens by client credentials: enough to call the API."""

    def __init__(self, scope: Construct, construct_id: str, *, removal_policy: RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.user_pool = cognito.UserPool(
            self,
            "UserPool",
            self_sign_up_enabled=False,
            sign_in_aliases=cognito.SignInAliases(email=True),
            password_policy=cognito.PasswordPolicy(
                min_length=12, require_digits=True, require_lowercase=True, require_uppercase=True, require_symbols=True
            ),
            mfa=cognito.Mfa.REQUIRED,
            mfa_second_factor=cognito.MfaSecondFactor(otp=True, sms=False),
            account_recovery=cognito.AccountRecovery.EMAIL_ONLY,
            removal_policy=removal_policy,
        )
        for rule in ("AwsSolutions-COG8",):
            acknowledge(
                self.user_pool,
                rule,
                "Threat protection needs the Plus feature plan, billed per monthly active user; the quick-start pool "
                "only issues machine tokens by client credentials. Turn it on before adding human sign-in.",
            )
        self.resource_server = self.user_pool.add_resource_server(
            "ResourceServer",
            identifier=RESOURCE_SERVER_ID,
            scopes=[cognito.ResourceServerScope(scope_name=INVOKE_SCOPE, scope_description="Call the MCP endpoint")],
        )
        self.scope = cognito.OAuthScope.resource_server(
            self.resource_server,
            cognito.ResourceServerScope(scope_name=INVOKE_SCOPE, scope_description="Call the MCP endpoint"),
        )
        self.client = self.user_pool.add_client(
            "MachineClient",
            generate_secret=True,
            auth_flows=cognito.AuthFlow(),
            o_auth=cognito.OAuthSettings(flows=cognito.OAuthFlows(client_credentials=True), scopes=[self.scope]),
            access_token_validity=Duration.hours(1),
            prevent_user_existence_errors=True,
        )
        stack = Stack.of(self)
        self.domain = self.user_pool.add_domain(
            "Domain",
            cognito_domain=cognito.CognitoDomainOptions(domain_prefix=f"mcp-{stack.account}"),
        )

    @property
    def issuer(self) -> str:
        return self.user_pool.user_pool_provider_url

    @property
    def token_url(self) -> str:
        return f"{self.domain.base_url()}/oauth2/token"

    @property
    def scope_name(self) -> str:
        return f"{RESOURCE_SERVER_ID}/{INVOKE_SCOPE}"


class HttpFront(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        handler: lambda_.IFunction,
        jwt_issuer: str | None,
        jwt_audience: tuple[str, ...],
        create_user_pool: bool,
        function_url: bool,
        cors_allow_origins: tuple[str, ...],
        throttle_rate_limit: int,
        throttle_burst_limit: int,
        log_retention_days: int,
        removal_policy: RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        self.user_pool: QuickStartUserPool | None = None
        scopes: list[str] = []
        if create_user_pool:
            self.user_pool = QuickStartUserPool(self, "Auth", removal_policy=removal_policy)
            issuer, audience = self.user_pool.issuer, [self.user_pool.client.user_pool_client_id]
            scopes = [self.user_pool.scope_name]
        elif jwt_issuer:
            issuer, audience = jwt_issuer, list(jwt_audience)
        else:
            raise ValueError("the HTTP API needs a JWT issuer or a quick-start user pool")

        cors = None
        if cors_allow_origins:
            cors = apigwv2.CorsPreflightOptions(
                allow_origins=list(cors_allow_origins),
                allow_methods=[apigwv2.CorsHttpMethod(method) for method in MCP_METHODS],
                allow_headers=list(MCP_REQUEST_HEADERS),
                expose_headers=list(MCP_RESPONSE_HEADERS),
                max_age=Duration.hours(1),
            )
        self.api = apigwv2.HttpApi(
            self,
            "HttpApi",
            description="MCP endpoint (/mcp), stateless: one JSON-RPC call per request",
            create_default_stage=False,
            cors_preflight=cors,
        )
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=retention(log_retention_days), removal_policy=removal_policy
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.api,
            auto_deploy=True,
            throttle=apigwv2.ThrottleSettings(rate_limit=throttle_rate_limit, burst_limit=throttle_burst_limit),
            access_log_settings=JsonAccessLogs(self.access_logs),
        )
        self.authorizer = authorizers.HttpJwtAuthorizer(
            "JwtAuthorizer", jwt_issuer=issuer, jwt_audience=audience, identity_source=["$request.header.Authorization"]
        )
        integration = integrations.HttpLambdaIntegration("Mcp", handler)
        self.api.add_routes(
            path=MCP_PATH,
            methods=[apigwv2.HttpMethod(method) for method in MCP_METHODS],
            integration=integration,
            authorizer=self.authorizer,
            authorization_scopes=scopes or None,
        )
        for path in METADATA_PATHS:
            routes = self.api.add_routes(path=path, methods=[apigwv2.HttpMethod.GET], integration=integration)
            acknowledge(
                routes[0],
                "AwsSolutions-APIG4",
                "Protected Resource Metadata (RFC 9728) must be readable without a token: it tells a client which "
                "authorization server issues tokens for the MCP endpoint. It is static and carries no data.",
            )
        self.endpoint_url = f"{self.api.api_endpoint}{MCP_PATH}"
        self.issuer = issuer
        self.scopes = tuple(scopes)

        self.function_url: lambda_.FunctionUrl | None = None
        if function_url:
            # No CORS on the Function URL: its callers sign requests with SigV4 (servers, not browsers).
            self.function_url = lambda_.FunctionUrl(
                self, "FunctionUrl", function=handler, auth_type=lambda_.FunctionUrlAuthType.AWS_IAM
            )
