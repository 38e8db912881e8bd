"""Create in the embedded moto what the synthesized template declares, from the template's own properties.

Created for real: DynamoDB tables (keys, indexes, TTL, streams), S3 buckets (encryption, lifecycle
rules, public access block), SQS queues (retention, visibility timeout; the on-failure destinations
and dead-letter queues of the event sources), Secrets Manager secrets (generated values), KMS keys (their key
spec and usage: the OAuth bridge's signing key signs in moto), Cognito user pools with
their resource servers, app clients and domains (moto's: the ids it assigns replace the template's
placeholders, so every reference resolves to them; its JWKS signs and verifies like the pool's), IAM
roles with exactly their inline policies and the template's `AWS::IAM::Policy` documents, Lambda
functions (so their ARNs exist; their code runs in `local_stack.runtime`) and Step Functions state
machines (the definition file and its substitutions as the template resolves them). Read, not
created: API Gateway routes and JWT authorizers (the HTTP front serves them), Function URLs, Lambda
event source mappings on DynamoDB streams, EventBridge rules with Lambda targets (event patterns, and
schedules with a rate expression), and functions' asynchronous invocation settings
(`local_stack.event_delivery` delivers those events as Lambda and EventBridge would). Listed as not
emulated: everything else (alarms, dashboards, log groups, cron schedules, Lambda permissions,
stages, bucket and queue policies), which no code path calls locally (a bucket
policy's TLS-only rule has nothing to refuse on loopback); and Cognito's managed login (its sign-in
pages and OAuth endpoints under the domain), which moto does not have.
"""

from __future__ import annotations

import io
import json
import re
import secrets
import string
import zipfile
from dataclasses import dataclass, field
from typing import Any, Final

from local_stack.runtime import PYTHON_RUNTIME, FunctionSpec
from local_stack.template import DeployedTemplate, Resource, TemplateError

COGNITO_TYPES: Final[tuple[str, ...]] = (
    "AWS::Cognito::UserPool",
    "AWS::Cognito::UserPoolResourceServer",
    "AWS::Cognito::UserPoolClient",
    "AWS::Cognito::UserPoolDomain",
)
CREATED_TYPES: Final[tuple[str, ...]] = (
    *COGNITO_TYPES,
    "AWS::DynamoDB::Table",
    "AWS::S3::Bucket",
    "AWS::SQS::Queue",
    "AWS::SecretsManager::Secret",
    "AWS::KMS::Key",
    "AWS::IAM::Role",
    "AWS::IAM::Policy",
    "AWS::Lambda::Function",
    "AWS::StepFunctions::StateMachine",
)
SERVED_TYPES: Final[tuple[str, ...]] = (
    "AWS::ApiGatewayV2::Api",
    "AWS::ApiGatewayV2::Route",
    "AWS::ApiGatewayV2::Authorizer",
    "AWS::ApiGatewayV2::Integration",
    "AWS::ApiGatewayV2::Stage",
    "AWS::Lambda::Permission",
    "AWS::Lambda::Url",
    "AWS::Lambda::EventSourceMapping",
    "AWS::Events::Rule",
    "AWS::Lambda::EventInvokeConfig",
)
# Lambda's default for asynchronous invocations (EventBridge targets) without an EventInvokeConfig.
DEFAULT_ASYNC_RETRY_ATTEMPTS: Final = 2


@dataclass(frozen=True, slots=True)
class Route:
    """One API Gateway HTTP API route with what it integrates and how it is authorized."""

    route_key: str  # "POST /mcp", "GET /.well-known/...", or "$default"
    function_logical_id: str
    authorization_type: str  # NONE, JWT, AWS_IAM
    issuer: str | None = None
    audience: tuple[str, ...] = ()
    identity_source: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()

    @property
    def method(self) -> str:
        return self.route_key.split(" ", 1)[0] if " " in self.route_key else "ANY"

    @property
    def path(self) -> str:
        return self.route_key.split(" ", 1)[1] if " " in self.route_key else ""


@dataclass(frozen=True, slots=True)
class StreamMapping:
    """An `AWS::Lambda::EventSourceMapping` on a DynamoDB stream, as Lambda's poller reads it."""

    logical_id: str
    function_logical_id: str
    stream_arn: str
    batch_size: int = 100
    starting_position: str = "LATEST"
    filter_patterns: tuple[str, ...] = ()
    report_batch_item_failures: bool = False
    maximum_retry_attempts: int = -1  # -1: until the record expires
    bisect_batch_on_function_error: bool = False
    maximum_record_age_seconds: int = -1
    maximum_batching_window_seconds: int = 0
    enabled: bool = True
    parallelization_factor: int = 1
    on_failure_arn: str | None = None  # DestinationConfig.OnFailure: an SQS queue of this template


@dataclass(frozen=True, slots=True)
class RuleTarget:
    function_logical_id: str
    maximum_retry_attempts: int = 185  # EventBridge's default delivery retries
    maximum_event_age_seconds: int = 86_400  # EventBridge's default: 24 hours
    dead_letter_arn: str | None = None  # DeadLetterConfig: an SQS queue of this template


@dataclass(frozen=True, slots=True)
class Queue:
    """An `AWS::SQS::Queue` as created in moto."""

    logical_id: str
    name: str
    url: str
    arn: str


@dataclass(frozen=True, slots=True)
class EventRule:
    """An `AWS::Events::Rule` on the default bus whose targets are the template's functions."""

    logical_id: str
    pattern: str  # the event pattern as JSON
    targets: tuple[RuleTarget, ...]
    enabled: bool = True


@dataclass(frozen=True, slots=True)
class ScheduledRule:
    """An `AWS::Events::Rule` with a rate expression (`rate(5 minutes)`) whose targets are the template's functions."""

    logical_id: str
    period_seconds: int
    targets: tuple[RuleTarget, ...]
    # A target's constant `Input` (JSON text) replaces the scheduled event, as EventBridge does.
    inputs: tuple[str | None, ...] = ()
    enabled: bool = True


@dataclass
class ProvisionedStack:
    """What the provisioner created, and what the front and the runtime need to serve the template."""

    template: DeployedTemplate
    functions: dict[str, FunctionSpec] = field(default_factory=dict)  # by logical id
    role_policies: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # role ARN -> documents
    routes: list[Route] = field(default_factory=list)
    state_machines: dict[str, str] = field(default_factory=dict)  # logical id -> ARN
    state_machine_roles: dict[str, str] = field(default_factory=dict)  # ARN -> role ARN
    tables: dict[str, str] = field(default_factory=dict)  # logical id -> name
    buckets: dict[str, str] = field(default_factory=dict)  # logical id -> name
    secrets: dict[str, str] = field(default_factory=dict)  # logical id -> ARN
    keys: dict[str, str] = field(default_factory=dict)  # logical id -> KMS key id
    stream_mappings: list[StreamMapping] = field(default_factory=list)
    event_rules: list[EventRule] = field(default_factory=list)
    scheduled_rules: list[ScheduledRule] = field(default_factory=list)
    async_retry_attempts: dict[str, int] = field(default_factory=dict)  # function logical id -> attempts
    async_on_failure: dict[str, str] = field(default_factory=dict)  # function logical id -> destination ARN
    queues: dict[str, Queue] = field(default_factory=dict)  # by logical id
    user_pools: dict[str, str] = field(default_factory=dict)  # logical id -> pool id
    managed_login_domains: dict[str, str] = field(default_factory=dict)  # logical id -> base URL (not emulated)
    not_emulated: dict[str, str] = field(default_factory=dict)  # logical id -> type

    def function(self, logical_id: str) -> FunctionSpec:
        return self.functions[logical_id]

    def queue_by_arn(self, arn: str) -> Queue | None:
        return next((queue for queue in self.queues.values() if queue.arn == arn), None)


def provision(template: DeployedTemplate, client: Any) -> ProvisionedStack:
    """Create the template's resources; `client(service)` returns an administrator's boto3 client."""
    stack = ProvisionedStack(template)
    # Secrets first: their ARNs (with the random suffix Secrets Manager adds) are referenced by policies
    # and environments. Every other physical id is known up front.
    for resource in template.resources("AWS::SecretsManager::Secret"):
        stack.secrets[resource.logical_id] = _create_secret(template, resource, client("secretsmanager"))
    for resource in template.resources("AWS::KMS::Key"):
        props = template.resolve(resource.properties)
        request = {key: props[key] for key in ("KeySpec", "KeyUsage", "Description") if key in props}
        key_id = str(client("kms").create_key(**request)["KeyMetadata"]["KeyId"])
        template.physical_ids[resource.logical_id] = stack.keys[resource.logical_id] = key_id
    _create_cognito(template, client("cognito-idp"), stack)
    for resource in template.resources("AWS::SQS::Queue"):
        queue = _create_queue(template, resource, client("sqs"))
        stack.queues[resource.logical_id] = queue
    for resource in template.resources("AWS::DynamoDB::Table"):
        stack.tables[resource.logical_id] = _create_table(template, resource, client("dynamodb"))
    for resource in template.resources("AWS::S3::Bucket"):
        stack.buckets[resource.logical_id] = _create_bucket(template, resource, client("s3"))
    iam = client("iam")
    for resource in template.resources("AWS::IAM::Role"):
        _create_role(template, resource, iam, stack)
    for resource in template.resources("AWS::IAM::Policy"):
        _attach_policy(template, resource, iam, stack)
    for resource in template.resources("AWS::Lambda::Function"):
        stack.functions[resource.logical_id] = _create_function(template, resource, client("lambda"))
    for resource in template.resources("AWS::StepFunctions::StateMachine"):
        _create_state_machine(template, resource, client("stepfunctions"), stack)
    stack.routes = _routes(template)
    stack.stream_mappings = _stream_mappings(template, stack)
    stack.event_rules = _event_rules(template, stack)
    for resource in template.resources("AWS::Lambda::EventInvokeConfig"):
        props = template.resolve(resource.properties)
        function = _function_named(stack, str(props["FunctionName"]))
        stack.async_retry_attempts[function] = int(props.get("MaximumRetryAttempts", DEFAULT_ASYNC_RETRY_ATTEMPTS))
        on_failure = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        if on_failure:
            stack.async_on_failure[function] = _queue_arn(stack, str(on_failure), resource.logical_id)
    for resource in template.resources():
        if resource.type not in CREATED_TYPES + SERVED_TYPES:
            stack.not_emulated[resource.logical_id] = resource.type
    return stack


# ---- DynamoDB ---------------------------------------------------------------------------------
def _create_table(template: DeployedTemplate, resource: Resource, dynamodb: Any) -> str:
    props = template.resolve(resource.properties)
    name = template.physical_id(resource.logical_id)
    request: dict[str, Any] = {
        "TableName": name,
        "KeySchema": props["KeySchema"],
        "AttributeDefinitions": props["AttributeDefinitions"],
        "BillingMode": props.get("BillingMode", "PROVISIONED"),
    }
    for key in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes", "ProvisionedThroughput"):
        if key in props:
            request[key] = props[key]
    stream = props.get("StreamSpecification")
    if stream:
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
    if props.get("DeletionProtectionEnabled"):
        request["DeletionProtectionEnabled"] = True
    created = dynamodb.create_table(**request)["TableDescription"]
    if created.get("LatestStreamArn"):
        template.attributes[(resource.logical_id, "StreamArn")] = str(created["LatestStreamArn"])
    ttl = props.get("TimeToLiveSpecification")
    if ttl and ttl.get("Enabled"):
        dynamodb.update_time_to_live(
            TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]}
        )
    return name


# ---- SQS --------------------------------------------------------------------------------------
_QUEUE_ATTRIBUTES: Final = ("MessageRetentionPeriod", "VisibilityTimeout", "DelaySeconds", "MaximumMessageSize")


def _create_queue(template: DeployedTemplate, resource: Resource, sqs: Any) -> Queue:
    """A standard queue with the template's timings (moto neither encrypts nor checks the queue policy;
    every caller here is on loopback with a signed request)."""
    props = template.resolve(resource.properties)
    if props.get("FifoQueue"):
        raise TemplateError(f"queue {resource.logical_id}: FIFO queues are not emulated")
    name = str(props.get("QueueName") or template.physical_id(resource.logical_id))[:80]
    attributes = {key: str(props[key]) for key in _QUEUE_ATTRIBUTES if key in props}
    url = str(sqs.create_queue(QueueName=name, Attributes=attributes)["QueueUrl"])
    arn = f"arn:aws:sqs:{template.region}:{template.account_id}:{name}"
    template.physical_ids[resource.logical_id] = url  # Ref gives the URL
    template.attributes[(resource.logical_id, "Arn")] = arn
    template.attributes[(resource.logical_id, "QueueName")] = name
    template.attributes[(resource.logical_id, "QueueUrl")] = url
    return Queue(resource.logical_id, name, url, arn)


def _queue_arn(stack: ProvisionedStack, arn: str, owner: str) -> str:
    if stack.queue_by_arn(arn) is None:
        raise TemplateError(f"{owner}: destination {arn!r} is not an SQS queue of this template")
    return arn


# ---- S3 ---------------------------------------------------------------------------------------
def _create_bucket(template: DeployedTemplate, resource: Resource, s3: Any) -> str:
    """A bucket with the template's encryption, lifecycle and public access block (moto stores them;
    it neither encrypts nor expires objects, and the bucket policy is not evaluated)."""
    props = template.resolve(resource.properties)
    name = template.physical_id(resource.logical_id)
    s3.create_bucket(Bucket=name)
    if props.get("BucketEncryption"):
        s3.put_bucket_encryption(Bucket=name, ServerSideEncryptionConfiguration=_sse(props["BucketEncryption"]))
    if props.get("PublicAccessBlockConfiguration"):
        s3.put_public_access_block(Bucket=name, PublicAccessBlockConfiguration=props["PublicAccessBlockConfiguration"])
    rules = (props.get("LifecycleConfiguration") or {}).get("Rules") or []
    if rules:
        s3.put_bucket_lifecycle_configuration(
            Bucket=name, LifecycleConfiguration={"Rules": [_lifecycle_rule(rule) for rule in rules]}
        )
    return name


def _sse(encryption: dict[str, Any]) -> dict[str, Any]:
    rules = []
    for rule in encryption.get("ServerSideEncryptionConfiguration") or []:
        default = rule.get("ServerSideEncryptionByDefault") or {}
        rules.append({"ApplyServerSideEncryptionByDefault": dict(default)})
    return {"Rules": rules}


def _lifecycle_rule(rule: dict[str, Any]) -> dict[str, Any]:
    """CloudFormation's lifecycle rule shape, in the S3 API's."""
    converted: dict[str, Any] = {"ID": rule.get("Id", "rule"), "Status": rule.get("Status", "Enabled")}
    converted["Filter"] = {"Prefix": rule.get("Prefix", "")}
    if "ExpirationInDays" in rule:
        converted["Expiration"] = {"Days": int(rule["ExpirationInDays"])}
    abort = rule.get("AbortIncompleteMultipartUpload")
    if abort:
        converted["AbortIncompleteMultipartUpload"] = {"DaysAfterInitiation": int(abort["DaysAfterInitiation"])}
    return converted


# ---- Cognito ----------------------------------------------------------------------------------
_POOL_PROPERTIES: Final = (
    "Policies",
    "UsernameAttributes",
    "AliasAttributes",
    "AdminCreateUserConfig",
    "AccountRecoverySetting",
    "AutoVerifiedAttributes",
    "UserPoolTags",
)
_CLIENT_PROPERTIES: Final = (
    "ClientName", "GenerateSecret", "RefreshTokenValidity", "AccessTokenValidity", "IdTokenValidity",
    "TokenValidityUnits", "ReadAttributes", "WriteAttributes", "ExplicitAuthFlows", "SupportedIdentityProviders",
    "CallbackURLs", "LogoutURLs", "DefaultRedirectURI", "AllowedOAuthFlows", "AllowedOAuthScopes",
    "AllowedOAuthFlowsUserPoolClient", "PreventUserExistenceErrors", "EnableTokenRevocation",
)  # fmt: skip


def _create_cognito(template: DeployedTemplate, cognito: Any, stack: ProvisionedStack) -> None:
    """Pools first (moto picks their ids), then what references them, each from its own properties."""
    for resource in template.resources("AWS::Cognito::UserPool"):
        props = template.resolve(resource.properties)
        request = {key: props[key] for key in _POOL_PROPERTIES if key in props}
        request["PoolName"] = str(props.get("UserPoolName") or template.name_of(resource.logical_id))
        pool_id = str(cognito.create_user_pool(**request)["UserPool"]["Id"])
        template.physical_ids[resource.logical_id] = pool_id
        stack.user_pools[resource.logical_id] = pool_id
    for resource in template.resources("AWS::Cognito::UserPoolResourceServer"):
        props = template.resolve(resource.properties)
        cognito.create_resource_server(
            UserPoolId=props["UserPoolId"], Identifier=props["Identifier"], Name=props["Name"],
            Scopes=props.get("Scopes") or [],
        )  # fmt: skip
        template.physical_ids[resource.logical_id] = str(props["Identifier"])
    for resource in template.resources("AWS::Cognito::UserPoolClient"):
        props = template.resolve(resource.properties)
        request = {key: props[key] for key in _CLIENT_PROPERTIES if key in props}
        request.setdefault("ClientName", resource.logical_id)  # CloudFormation names an unnamed client
        created = cognito.create_user_pool_client(UserPoolId=props["UserPoolId"], **request)["UserPoolClient"]
        template.physical_ids[resource.logical_id] = str(created["ClientId"])
    for resource in template.resources("AWS::Cognito::UserPoolDomain"):
        props = template.resolve(resource.properties)
        cognito.create_user_pool_domain(Domain=props["Domain"], UserPoolId=props["UserPoolId"])
        template.physical_ids[resource.logical_id] = str(props["Domain"])
        stack.managed_login_domains[resource.logical_id] = (
            f"https://{props['Domain']}.auth.{template.region}.amazoncognito.com"
        )


def serve_bridge_at(stack: ProvisionedStack, cognito: Any, origin: str) -> None:
    """The OAuth bridge's app client calls back to `origin` (the stack's loopback one), not to the template's
    execute-api host: what its CallbackURLs would be had the template been deployed there."""
    bridge = next((f for f in stack.functions.values() if "BRIDGE_APP_CLIENT_ID" in f.environment), None)
    if bridge is None:
        return
    pool, client_id = bridge.environment["BRIDGE_USER_POOL_ID"], bridge.environment["BRIDGE_APP_CLIENT_ID"]
    described = cognito.describe_user_pool_client(UserPoolId=pool, ClientId=client_id)["UserPoolClient"]
    kept = {key: described[key] for key in _CLIENT_PROPERTIES if key in described and key != "GenerateSecret"}
    callbacks = [origin.rstrip("/") + "/" + url.split("/", 3)[3] for url in described.get("CallbackURLs", [])]
    cognito.update_user_pool_client(UserPoolId=pool, ClientId=client_id, **{**kept, "CallbackURLs": callbacks})


# ---- Secrets Manager --------------------------------------------------------------------------
def _generate(options: dict[str, Any]) -> str:
    """A value as GenerateSecretString describes it (length and character classes)."""
    alphabet = ""
    if not options.get("ExcludeLowercase"):
        alphabet += string.ascii_lowercase
    if not options.get("ExcludeUppercase"):
        alphabet += string.ascii_uppercase
    if not options.get("ExcludeNumbers"):
        alphabet += string.digits
    if not options.get("ExcludePunctuation"):
        alphabet += "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    if options.get("IncludeSpace"):
        alphabet += " "
    excluded = set(str(options.get("ExcludeCharacters") or ""))
    alphabet = "".join(c for c in alphabet if c not in excluded)
    length = int(options.get("PasswordLength") or 32)
    value = "".join(secrets.choice(alphabet) for _ in range(length))
    template_text, key = options.get("SecretStringTemplate"), options.get("GenerateStringKey")
    if template_text and key:
        document = json.loads(template_text)
        document[key] = value
        return json.dumps(document)
    return value


def _create_secret(template: DeployedTemplate, resource: Resource, secretsmanager: Any) -> str:
    props = template.resolve(resource.properties)
    name = template.name_of(resource.logical_id)
    value = props.get("SecretString")
    if value is None:
        value = _generate(props.get("GenerateSecretString") or {})
    request: dict[str, Any] = {"Name": name, "SecretString": value}
    if props.get("Description"):
        request["Description"] = props["Description"]
    arn = str(secretsmanager.create_secret(**request)["ARN"])
    template.physical_ids[resource.logical_id] = arn
    return arn


# ---- IAM --------------------------------------------------------------------------------------
def _create_role(template: DeployedTemplate, resource: Resource, iam: Any, stack: ProvisionedStack) -> None:
    props = template.resolve(resource.properties)
    if props.get("ManagedPolicyArns") or props.get("PermissionsBoundary"):
        raise TemplateError(
            f"role {resource.logical_id} uses managed policies or a permissions boundary, which the local IAM "
            "(moto ships no AWS managed policies) cannot evaluate: use inline policies (CDK: add_to_principal_policy)"
        )
    name = template.physical_id(resource.logical_id)
    request: dict[str, Any] = {
        "RoleName": name,
        "AssumeRolePolicyDocument": json.dumps(props["AssumeRolePolicyDocument"]),
    }
    if props.get("Path"):
        request["Path"] = props["Path"]
    if props.get("Description"):
        request["Description"] = props["Description"][:1000]
    arn = str(iam.create_role(**request)["Role"]["Arn"])
    stack.role_policies[arn] = []
    for policy in props.get("Policies") or []:
        _put_role_policy(iam, stack, name, arn, policy["PolicyName"], policy["PolicyDocument"])


def _attach_policy(template: DeployedTemplate, resource: Resource, iam: Any, stack: ProvisionedStack) -> None:
    props = template.resolve(resource.properties)
    for role_name in props.get("Roles") or []:
        arn = f"arn:aws:iam::{template.account_id}:role/{role_name}"
        _put_role_policy(iam, stack, role_name, arn, props["PolicyName"], props["PolicyDocument"])
    if props.get("Users") or props.get("Groups"):
        raise TemplateError(
            f"policy {resource.logical_id} is attached to users or groups, which the local stack does not create"
        )


def _put_role_policy(
    iam: Any, stack: ProvisionedStack, role: str, arn: str, name: str, document: dict[str, Any]
) -> None:
    iam.put_role_policy(RoleName=role, PolicyName=name, PolicyDocument=json.dumps(document))
    stack.role_policies.setdefault(arn, []).append(document)


# ---- Lambda -----------------------------------------------------------------------------------
def _placeholder_zip() -> bytes:
    """moto wants a code package; what runs is the asset, in `local_stack.runtime`."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("README.txt", "The local stack runs this function from its asset, in its own interpreter.\n")
    return buffer.getvalue()


def _create_function(template: DeployedTemplate, resource: Resource, lambda_client: Any) -> FunctionSpec:
    props = template.resolve(resource.properties)
    runtime = str(props.get("Runtime") or "")
    if not runtime.startswith("python3"):
        raise TemplateError(f"function {resource.logical_id} runs {runtime!r}; the local stack runs Python functions")
    name = template.physical_id(resource.logical_id)
    environment = {str(k): str(v) for k, v in ((props.get("Environment") or {}).get("Variables") or {}).items()}
    logging_config = props.get("LoggingConfig") or {}
    spec = FunctionSpec(
        logical_id=resource.logical_id,
        name=name,
        arn=template.attribute(resource.logical_id, "Arn"),
        handler=str(props["Handler"]),
        runtime=runtime,
        timeout_seconds=int(props.get("Timeout") or 3),
        memory_mb=int(props.get("MemorySize") or 128),
        environment=environment,
        role_arn=str(props["Role"]),
        log_group_name=str(logging_config.get("LogGroup") or f"/aws/lambda/{name}"),
        tracing_active=(props.get("TracingConfig") or {}).get("Mode") == "Active",
        reserved_concurrency=(
            int(props["ReservedConcurrentExecutions"])
            if props.get("ReservedConcurrentExecutions") is not None
            else None
        ),
    )
    lambda_client.create_function(
        FunctionName=name,
        Runtime=PYTHON_RUNTIME if runtime == PYTHON_RUNTIME else runtime,
        Role=spec.role_arn,
        Handler=spec.handler,
        Code={"ZipFile": _placeholder_zip()},
        Timeout=spec.timeout_seconds,
        MemorySize=spec.memory_mb,
        Environment={"Variables": environment},
    )
    return spec


# ---- Step Functions ---------------------------------------------------------------------------
def state_machine_definition(template: DeployedTemplate, resource: Resource) -> str:
    """The definition as deployed: `DefinitionString`, `Definition` or the `DefinitionS3Location`
    asset, with `DefinitionSubstitutions` filled the way the service fills them."""
    props = resource.properties
    if "DefinitionString" in props:
        text = str(template.resolve(props["DefinitionString"]))
    elif "Definition" in props:
        text = json.dumps(template.resolve(props["Definition"]))
    elif "DefinitionS3Location" in props:
        location = template.resolve(props["DefinitionS3Location"])
        text = template.asset_file(str(location["Key"])).read_text(encoding="utf-8")
    else:
        raise TemplateError(f"state machine {resource.logical_id} has no definition")
    for key, value in (template.resolve(props.get("DefinitionSubstitutions")) or {}).items():
        text = text.replace("${" + key + "}", str(value))
    json.loads(text)  # fail here, not at the first execution
    return text


def _create_state_machine(template: DeployedTemplate, resource: Resource, sfn: Any, stack: ProvisionedStack) -> None:
    props = template.resolve(resource.properties)
    arn = template.physical_id(resource.logical_id)
    created = sfn.create_state_machine(
        name=template.name_of(resource.logical_id),
        definition=state_machine_definition(template, resource),
        roleArn=props["RoleArn"],
        type=props.get("StateMachineType", "STANDARD"),
    )
    if created["stateMachineArn"] != arn:
        raise TemplateError(f"state machine {resource.logical_id} got {created['stateMachineArn']}, expected {arn}")
    stack.state_machines[resource.logical_id] = arn
    stack.state_machine_roles[arn] = str(props["RoleArn"])


# ---- API Gateway (read, served by the front) ---------------------------------------------------
def _routes(template: DeployedTemplate) -> list[Route]:
    integrations: dict[str, str] = {}
    for resource in template.resources("AWS::ApiGatewayV2::Integration"):
        uri = resource.properties.get("IntegrationUri")
        target = _function_behind(template, uri)
        if target is not None:
            integrations[resource.logical_id] = target
    authorizers = {r.logical_id: r for r in template.resources("AWS::ApiGatewayV2::Authorizer")}
    routes = []
    for resource in template.resources("AWS::ApiGatewayV2::Route"):
        props = resource.properties
        target = template.resolve(props.get("Target")) or ""
        integration = next((lid for lid in integrations if target == f"integrations/{template.physical_id(lid)}"), None)
        if integration is None:
            raise TemplateError(f"route {resource.logical_id} targets {target!r}, which is not a Lambda integration")
        authorization = str(props.get("AuthorizationType") or "NONE")
        route = Route(str(props["RouteKey"]), integrations[integration], authorization)
        if authorization == "JWT":
            authorizer_id = template.resolve(props["AuthorizerId"])
            authorizer = next(r for lid, r in authorizers.items() if template.physical_id(lid) == authorizer_id)
            jwt = template.resolve(authorizer.properties["JwtConfiguration"])
            route = Route(
                route.route_key,
                route.function_logical_id,
                authorization,
                issuer=str(jwt["Issuer"]),
                audience=tuple(str(a) for a in jwt.get("Audience") or ()),
                identity_source=tuple(template.resolve(authorizer.properties.get("IdentitySource")) or ()),
                scopes=tuple(str(s) for s in template.resolve(props.get("AuthorizationScopes")) or ()),
            )
        routes.append(route)
    return routes


def _function_behind(template: DeployedTemplate, uri: Any) -> str | None:
    """The logical id of the function an integration URI names (`Fn::GetAtt [Fn, Arn]`, possibly joined)."""
    if isinstance(uri, dict) and "Fn::GetAtt" in uri:
        logical_id = uri["Fn::GetAtt"][0] if isinstance(uri["Fn::GetAtt"], list) else uri["Fn::GetAtt"].split(".")[0]
        return str(logical_id)
    resolved = template.resolve(uri)
    for resource in template.resources("AWS::Lambda::Function"):
        if resolved and template.attribute(resource.logical_id, "Arn") in str(resolved):
            return resource.logical_id
    return None


# ---- event sources (read, delivered by local_stack.event_delivery) ----------------------------------
def _function_named(stack: ProvisionedStack, name_or_arn: str) -> str:
    """The logical id of the template's function a name or ARN refers to."""
    for logical_id, spec in stack.functions.items():
        if name_or_arn in (spec.name, spec.arn) or name_or_arn.startswith(spec.arn + ":"):
            return logical_id
    raise TemplateError(f"{name_or_arn!r} is not a function of this template")


def _stream_mappings(template: DeployedTemplate, stack: ProvisionedStack) -> list[StreamMapping]:
    mappings = []
    for resource in template.resources("AWS::Lambda::EventSourceMapping"):
        props = template.resolve(resource.properties)
        source = str(props["EventSourceArn"])
        if ":dynamodb:" not in source or "/stream/" not in source:
            raise TemplateError(f"event source mapping {resource.logical_id} reads {source!r}: only DynamoDB streams")
        if props.get("TumblingWindowInSeconds"):
            raise TemplateError(f"event source mapping {resource.logical_id}: tumbling windows are not emulated")
        on_failure = ((props.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination")
        filters = tuple(str(f["Pattern"]) for f in ((props.get("FilterCriteria") or {}).get("Filters") or ()))
        mappings.append(
            StreamMapping(
                logical_id=resource.logical_id,
                function_logical_id=_function_named(stack, str(props["FunctionName"])),
                stream_arn=source,
                batch_size=int(props.get("BatchSize", 100)),
                starting_position=str(props.get("StartingPosition", "LATEST")),
                filter_patterns=filters,
                report_batch_item_failures="ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or ()),
                maximum_retry_attempts=int(props.get("MaximumRetryAttempts", -1)),
                bisect_batch_on_function_error=bool(props.get("BisectBatchOnFunctionError", False)),
                maximum_record_age_seconds=int(props.get("MaximumRecordAgeInSeconds", -1)),
                maximum_batching_window_seconds=int(props.get("MaximumBatchingWindowInSeconds", 0)),
                enabled=bool(props.get("Enabled", True)),
                parallelization_factor=int(props.get("ParallelizationFactor", 1)),
                on_failure_arn=_queue_arn(stack, str(on_failure), resource.logical_id) if on_failure else None,
            )
        )
    return mappings


_RATE = re.compile(r"^rate\((\d+) (minute|minutes|hour|hours|day|days)\)$")
_RATE_UNIT_SECONDS: Final = {"minute": 60, "hour": 3600, "day": 86400}


def rate_seconds(expression: str) -> int | None:
    """The period of an EventBridge rate expression in seconds (None for anything else, e.g. cron)."""
    match = _RATE.match(expression.strip())
    if match is None:
        return None
    return int(match.group(1)) * _RATE_UNIT_SECONDS[match.group(2).rstrip("s")]


def _scheduled_rule(template: DeployedTemplate, stack: ProvisionedStack, resource: Resource) -> None:
    props = template.resolve(resource.properties)
    period = rate_seconds(str(props["ScheduleExpression"]))
    if period is None:
        stack.not_emulated[resource.logical_id] = "cron-scheduled EventBridge rules"
        return
    targets, inputs = [], []
    for target in props.get("Targets") or ():
        if any(key in target for key in ("InputPath", "InputTransformer")):
            raise TemplateError(f"rule {resource.logical_id}: target input transformations are not emulated")
        retry = (target.get("RetryPolicy") or {}).get("MaximumRetryAttempts", 185)
        targets.append(RuleTarget(_function_named(stack, str(target["Arn"])), int(retry)))
        inputs.append(str(target["Input"]) if "Input" in target else None)
    stack.scheduled_rules.append(
        ScheduledRule(
            resource.logical_id,
            period,
            tuple(targets),
            tuple(inputs),
            str(props.get("State", "ENABLED")) == "ENABLED",
        )
    )


def _event_rules(template: DeployedTemplate, stack: ProvisionedStack) -> list[EventRule]:
    rules = []
    for resource in template.resources("AWS::Events::Rule"):
        props = template.resolve(resource.properties)
        if "ScheduleExpression" in props and "EventPattern" not in props:
            _scheduled_rule(template, stack, resource)
            continue
        if str(props.get("EventBusName") or "default") != "default" or "EventPattern" not in props:
            raise TemplateError(f"rule {resource.logical_id}: only event patterns on the default bus are emulated")
        targets = []
        for target in props.get("Targets") or ():
            if any(key in target for key in ("Input", "InputPath", "InputTransformer")):
                raise TemplateError(f"rule {resource.logical_id}: target input transformations are not emulated")
            policy = target.get("RetryPolicy") or {}
            dead_letter = (target.get("DeadLetterConfig") or {}).get("Arn")
            targets.append(
                RuleTarget(
                    _function_named(stack, str(target["Arn"])),
                    int(policy.get("MaximumRetryAttempts", 185)),
                    int(policy.get("MaximumEventAgeInSeconds", 86_400)),
                    _queue_arn(stack, str(dead_letter), resource.logical_id) if dead_letter else None,
                )
            )
        pattern = props["EventPattern"]
        rules.append(
            EventRule(
                resource.logical_id,
                pattern if isinstance(pattern, str) else json.dumps(pattern),
                tuple(targets),
                str(props.get("State", "ENABLED")) == "ENABLED",
            )
        )
    return rules
