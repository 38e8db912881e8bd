"""The HTTP front: an API Gateway HTTP API, the token issuer it trusts, and `POST /mcp` on it (optionally
also a Lambda Function URL with AWS_IAM auth). Both deliver payload 2.0 events to the same API function.

The API function validates access tokens itself (`mcp_runtime/tokens.py`), so the route has no
API Gateway authorizer: API Gateway's own 401 carries no `resource_metadata`, answers 403 without
`insufficient_scope`, and its JWT authorizer cannot accept the client ids that dynamic registration
mints. What the function must check is computed here up front (`function_environment`), before the
function exists; the function's construct then serves the MCP routes (`serve_mcp`), as the callback
and bridge constructs serve theirs on the same API.

`POST /mcp` carries every JSON-RPC message; `GET /mcp` (resume an event stream with Last-Event-ID)
and `DELETE /mcp` (end a session) serve handshake-era (2025) clients, authorized the same way.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import cast

import jsii
from aws_cdk import Aws, Duration, Fn, RemovalPolicy, Stack
from aws_cdk import aws_apigateway as apigw
from aws_cdk import aws_apigatewayv2 as apigwv2
from aws_cdk import aws_apigatewayv2_integrations as integrations
from aws_cdk import aws_certificatemanager as acm
from aws_cdk import aws_cognito as cognito
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from infra.capabilities._lambda import retention
from infra.config import IAM_PRINCIPALS, AuthConfig, RouteThrottle, check_domain_prefix
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
    """A Cognito user pool for the MCP endpoint: a resource server with the `mcp/invoke` scope, a
    machine client (client credentials), and a domain. With `user_sign_in`, people sign in through
    Cognito's managed login with the authorization code grant and PKCE, from app clients the OAuth
    bridge registers for MCP clients (Cognito itself offers no client registration)."""

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        removal_policy: RemovalPolicy,
        domain_prefix: str | None,
        user_sign_in: bool,
    ) -> None:
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
        acknowledge(
            self.user_pool,
            "AwsSolutions-COG8",
            "Threat protection needs the Plus feature plan, billed per monthly active user; the template leaves that "
            "choice to you. Users are created by an administrator only (no self sign-up) and need a TOTP second "
            "factor. Turn it on (featurePlan PLUS, threatProtectionMode) before opening sign-in to many people.",
        )
        invoke = cognito.ResourceServerScope(scope_name=INVOKE_SCOPE, scope_description="Call the MCP endpoint")
        self.resource_server = self.user_pool.add_resource_server(
            "ResourceServer", identifier=RESOURCE_SERVER_ID, scopes=[invoke]
        )
        self.scope = cognito.OAuthScope.resource_server(self.resource_server, invoke)
        self.client = self.user_pool.add_client(
            "MachineClient",
            generate_secret=True,
            auth_flows=cognito.AuthFlow(),
            o_auth=cognito.OAuthSettings(flows=cognito.OAuthFlows(client_credentials=True), scopes=[self.scope]),
            access_token_validity=Duration.hours(1),
            prevent_user_existence_errors=True,
        )
        self.domain = self.user_pool.add_domain(
            "Domain",
            cognito_domain=cognito.CognitoDomainOptions(domain_prefix=domain_prefix or default_domain_prefix(self)),
        )
        self.user_sign_in = user_sign_in

    @property
    def issuer(self) -> str:
        return self.user_pool.user_pool_provider_url

    @property
    def jwks_url(self) -> str:
        return f"{self.issuer}/.well-known/jwks.json"

    @property
    def domain_url(self) -> str:
        """Cognito's OAuth endpoints and managed login live under this URL (`/oauth2/...`, `/login`)."""
        return self.domain.base_url()

    @property
    def token_url(self) -> str:
        return f"{self.domain_url}/oauth2/token"

    @property
    def scope_name(self) -> str:
        return f"{RESOURCE_SERVER_ID}/{INVOKE_SCOPE}"


def default_domain_prefix(scope: Construct) -> str:
    """`<stack name>-<account id>`: one per stack, so a second stack (dev and prod, a renamed copy) in
    the same account and region gets its own domain instead of colliding."""
    stack = Stack.of(scope)
    slug = re.sub(r"[^a-z0-9-]+", "-", stack.stack_name.lower()).strip("-")[:50].strip("-")
    check_domain_prefix(slug)
    return Fn.join("-", [slug, Aws.ACCOUNT_ID])


def api_function_environment(
    auth: AuthConfig, pool: QuickStartUserPool | None, resource_url: str | None
) -> dict[str, str]:
    """What the API function checks a token against, and what it publishes as protected resource
    metadata (RFC 9728): one place, from the configuration, before any construct is wired."""
    environment: dict[str, str] = {}
    if resource_url:
        environment["MCP_RESOURCE_URL"] = resource_url
    if auth.iam_principal != "session":  # who a Function URL (SigV4) caller is
        environment["MCP_IAM_PRINCIPAL"] = IAM_PRINCIPALS[auth.iam_principal]
    if pool is not None:
        environment.update(
            MCP_JWT_ISSUER=pool.issuer,
            MCP_JWT_JWKS_URL=pool.jwks_url,
            MCP_JWT_REQUIRED_SCOPES=pool.scope_name,
            # Cognito access tokens carry no `aud`; the scope names this pool's resource server.
            MCP_JWT_AUDIENCE_OPTIONAL="true",
            MCP_SCOPES_SUPPORTED=pool.scope_name,
            # With the bridge, this API's own origin is the authorization server clients discover.
            MCP_AUTHORIZATION_SERVERS="self" if pool.user_sign_in else pool.issuer,
        )
        return environment
    assert auth.jwt_issuer is not None
    environment.update(MCP_JWT_ISSUER=auth.jwt_issuer, MCP_AUTHORIZATION_SERVERS=auth.jwt_issuer)
    if auth.jwt_audience:
        environment["MCP_JWT_AUDIENCE"] = ",".join(auth.jwt_audience)
    if auth.jwt_scopes:
        environment["MCP_JWT_REQUIRED_SCOPES"] = " ".join(auth.jwt_scopes)
        environment["MCP_SCOPES_SUPPORTED"] = ",".join(auth.jwt_scopes)
    if auth.jwt_jwks_url:
        environment["MCP_JWT_JWKS_URL"] = auth.jwt_jwks_url
    return environment


class HttpFront(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        auth: AuthConfig,
        resource_url: str | None,
        cors_allow_origins: tuple[str, ...],
        throttle_rate_limit: int,
        throttle_burst_limit: int,
        mcp_throttle: RouteThrottle,
        log_retention_days: int,
        removal_policy: RemovalPolicy,
        custom_domain: tuple[str, str] | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        self.user_pool: QuickStartUserPool | None = None
        if auth.uses_cognito:
            self.user_pool = QuickStartUserPool(
                self,
                "Auth",
                removal_policy=removal_policy,
                domain_prefix=auth.cognito_domain_prefix,
                user_sign_in=auth.bridge,
            )
        self.function_environment = api_function_environment(auth, self.user_pool, resource_url)
        self.issuer = self.function_environment["MCP_JWT_ISSUER"]

        cors = None
        if cors_allow_origins:
            cors = apigwv2.CorsPreflightOptions(
                allow_origins=list(cors_allow_origins),
                allow_methods=[apigwv2.CorsHttpMethod(method) for method in MCP_METHODS],
                allow_headers=list(MCP_REQUEST_HEADERS),
                expose_headers=[*MCP_RESPONSE_HEADERS, "www-authenticate"],
                max_age=Duration.hours(1),
            )
        self.api = apigwv2.HttpApi(
            self,
            "HttpApi",
            description="MCP endpoint (/mcp), stateless: one JSON-RPC call per request",
            create_default_stage=False,
            cors_preflight=cors,
            # With a custom domain, the domain is the only way in: the execute-api host beside it would be a
            # second origin (its sign-in pages, its callback) that a stranger could start flows on.
            disable_execute_api_endpoint=custom_domain is not None,
        )
        self.access_logs = logs.LogGroup(
            self, "AccessLogs", retention=retention(log_retention_days), removal_policy=removal_policy
        )
        self.stage = apigwv2.HttpStage(
            self,
            "DefaultStage",
            http_api=self.api,
            auto_deploy=True,
            # The default of every route without limits of its own (`throttle_routes`).
            throttle=apigwv2.ThrottleSettings(rate_limit=throttle_rate_limit, burst_limit=throttle_burst_limit),
            access_log_settings=JsonAccessLogs(self.access_logs),
        )
        self.mcp_throttle = mcp_throttle
        # Route key ("POST /mcp") -> its limits: the stage's RouteSettings (`throttle_routes`).
        self.route_throttles: dict[str, RouteThrottle] = {}
        self.domain: apigwv2.DomainName | None = None
        if custom_domain is None:
            # Where clients, the bridge and external callers reach this API (never a request's Host).
            self.public_origin: str = self.api.api_endpoint
        else:
            name, certificate_arn = custom_domain
            self.domain = apigwv2.DomainName(
                self,
                "CustomDomain",
                domain_name=name,
                certificate=acm.Certificate.from_certificate_arn(self, "CustomDomainCertificate", certificate_arn),
            )
            # No api_mapping_key: a base path would hide /.well-known/* from clients that probe the root.
            apigwv2.ApiMapping(self, "CustomDomainMapping", api=self.api, domain_name=self.domain, stage=self.stage)
            self.public_origin = f"https://{name}"
        self.endpoint_url = f"{self.public_origin}{MCP_PATH}"
        self.scopes = tuple(self.function_environment.get("MCP_JWT_REQUIRED_SCOPES", "").split())
        self.function_url: lambda_.FunctionUrl | None = None

    def throttle_routes(self, routes: Iterable[apigwv2.HttpRoute], limits: RouteThrottle) -> None:
        """Limits of their own for these routes (the stage's RouteSettings), instead of the stage's default:
        API Gateway keeps a token bucket per route key, so a flood of sign-ins throttles the sign-in
        routes and leaves `/mcp` its own limits. The keys are read from the routes themselves (never
        spelled twice), and the stage waits for the routes: a RouteSettings key naming a route that does
        not exist yet fails the deployment."""
        for route in routes:
            key = cast(apigwv2.CfnRoute, route.node.default_child).route_key
            self.route_throttles[key] = limits
            self.stage.node.add_dependency(route)
        cfn_stage = cast(apigwv2.CfnStage, self.stage.node.default_child)
        cfn_stage.route_settings = {
            key: {"ThrottlingRateLimit": limit.rate, "ThrottlingBurstLimit": limit.burst}
            for key, limit in sorted(self.route_throttles.items())
        }

    def serve_mcp(self, handler: lambda_.IFunction, *, function_url: bool) -> None:
        """`/mcp` and the protected resource metadata on this API, served by `handler`; with
        `function_url`, a Function URL (AWS_IAM) in front of the same function."""
        integration = integrations.HttpLambdaIntegration("Mcp", handler)
        mcp_routes = self.api.add_routes(
            path=MCP_PATH, methods=[apigwv2.HttpMethod(method) for method in MCP_METHODS], integration=integration
        )
        self.throttle_routes(mcp_routes, self.mcp_throttle)
        for route in mcp_routes:
            acknowledge(
                route,
                "AwsSolutions-APIG4",
                "The API function authorizes every request itself: it validates the bearer token's signature (the "
                "issuer's JWKS), issuer, audience, expiry and scopes (mcp_runtime/tokens.py) and refuses with the "
                "WWW-Authenticate challenge MCP clients need to sign in, which an API Gateway authorizer cannot send.",
            )
        for path in METADATA_PATHS:
            routes = self.api.add_routes(path=path, methods=[apigwv2.HttpMethod.GET], integration=integration)
            acknowledge(
                routes[0],
                "AwsSolutions-APIG4",
                "Protected Resource Metadata (RFC 9728) must be readable without a token: it tells a client which "
                "authorization server issues tokens for the MCP endpoint. It is static and carries no data.",
            )
        if function_url:
            # No CORS on the Function URL: its callers sign requests with SigV4 (servers, not browsers).
            # Nor any throttle: a Function URL has no request throttling of its own; what bounds it is the
            # API function's concurrency (`apiReservedConcurrency`, shared with `/mcp` on the HTTP API),
            # and its callers are IAM principals of your accounts, not strangers.
            self.function_url = lambda_.FunctionUrl(
                self, "FunctionUrl", function=handler, auth_type=lambda_.FunctionUrlAuthType.AWS_IAM
            )
