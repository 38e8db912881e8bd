"""The stack: a thin composition of one construct per capability."""

from __future__ import annotations

from aws_cdk import Aspects, CfnOutput, Duration, Stack
from constructs import Construct

from infra import bundling
from infra.capabilities._lambda import FunctionDefaults, task_environment
from infra.capabilities.callbacks import TaskCallbacks
from infra.capabilities.functions import TaskFunctions
from infra.capabilities.http_front import HttpFront
from infra.capabilities.monitoring import Monitoring
from infra.capabilities.oauth_bridge import OAuthBridge
from infra.capabilities.payloads import TaskPayloads
from infra.capabilities.sealing_secret import SealingSecret
from infra.capabilities.sign_in_firewall import SignInFirewall
from infra.capabilities.supervisor import TaskSupervisor
from infra.capabilities.sweeper import TaskSweeper
from infra.capabilities.task_table import TaskTable
from infra.capabilities.tool_access import ToolAccess
from infra.capabilities.workflow import StateMachineIdentity, TaskWorkflow, round_limit
from infra.config import DeploymentConfig
from infra.sam_metadata import SamResourceIds


class McpTasksStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: DeploymentConfig, **kwargs: object) -> None:
        super().__init__(scope, construct_id, **kwargs)  # type: ignore[arg-type]
        self.config = config
        Aspects.of(self).add(SamResourceIds())
        # Built in the order they use each other; what is known before a construct exists (the state
        # machine's ARN, from its fixed name) is computed here and handed to the constructors.
        self.tasks = TaskTable(self, "TaskTable", removal_policy=config.removal)
        self.sealing = SealingSecret(self, "SealingSecret")
        self.payloads = TaskPayloads(
            self, "Payloads", task_ttl_hours=config.task_ttl_hours, removal_policy=config.removal
        )
        self.front = HttpFront(
            self,
            "HttpFront",
            auth=config.auth,
            resource_url=config.resource_url,
            cors_allow_origins=config.cors_allow_origins,
            throttle_rate_limit=config.throttle_rate_limit,
            throttle_burst_limit=config.throttle_burst_limit,
            mcp_throttle=config.mcp_throttle,
            log_retention_days=config.log_retention_days,
            removal_policy=config.removal,
            custom_domain=(
                (config.custom_domain_name, config.custom_domain_certificate_arn)
                if config.custom_domain_name and config.custom_domain_certificate_arn
                else None
            ),
        )
        self.sign_in_firewall: SignInFirewall | None = None
        if self.front.user_pool is not None and config.sign_in_waf_rate_limit is not None:
            self.sign_in_firewall = SignInFirewall(
                self,
                "SignInFirewall",
                user_pool_arn=self.front.user_pool.user_pool.user_pool_arn,
                rate_limit=config.sign_in_waf_rate_limit,
            )
        code = bundling.function_code(scope=self)
        defaults = FunctionDefaults(
            code=code,
            environment=task_environment(config.server_name, self.tasks.table, lease_seconds=config.task_lease_seconds),
            log_retention_days=config.log_retention_days,
            removal_policy=config.removal,
        )
        self.callbacks = TaskCallbacks(
            self,
            "Callbacks",
            defaults=defaults,
            table=self.tasks.table,
            payloads=self.payloads,
            http_api=self.front.api,
            public_origin=self.front.public_origin,
        )
        state_machine = StateMachineIdentity.of(self)
        self.functions = TaskFunctions(
            self,
            "Functions",
            defaults=defaults,
            table=self.tasks.table,
            front=self.front,
            secret=self.sealing,
            payloads=self.payloads,
            state_machine=state_machine,
            callback_url=self.callbacks.url,
            rounds_per_execution=round_limit(config.execution_round_limit, config.throttle_retry),
            api_reserved_concurrency=config.concurrency.api,
            worker_reserved_concurrency=config.concurrency.worker,
            task_ttl_hours=config.task_ttl_hours,
            api_memory_mb=config.api_memory_mb,
            api_timeout=Duration.seconds(config.api_timeout_seconds),
            worker_memory_mb=config.worker_memory_mb,
            worker_timeout=Duration.seconds(config.worker_timeout_seconds),
            allowed_origins=config.cors_allow_origins,
            function_url=config.function_url,
        )
        # What cdk.json gives the tools (environment, secrets, IAM statements, VPC), on the functions that run them.
        self.tool_access = ToolAccess(
            self, "ToolAccess", config=config.tools, functions=(self.functions.api, self.functions.worker)
        )
        self.workflow = TaskWorkflow(
            self,
            "Workflow",
            identity=state_machine,
            worker=self.functions.worker_function,
            table=self.tasks.table,
            log_retention_days=config.log_retention_days,
            removal_policy=config.removal,
            throttle_retry=config.throttle_retry,
        )
        self.supervisor = TaskSupervisor(
            self,
            "Supervisor",
            defaults=defaults,
            table=self.tasks.table,
            workflow=self.workflow,
            reserved_concurrency=config.concurrency.supervisor,
            retry_seconds=config.supervisor_retry_seconds,
        )
        self.sweeper = TaskSweeper(
            self,
            "Sweeper",
            defaults=defaults,
            table=self.tasks.table,
            workflow=self.workflow,
            interval_minutes=config.sweep_interval_minutes,
            max_checks=config.sweep_max_checks,
        )
        self.bridge: OAuthBridge | None = None
        if self.front.user_pool is not None and config.auth.bridge:
            self.bridge = OAuthBridge(
                self,
                "OAuthBridge",
                code=code,
                http_api=self.front.api,
                public_origin=self.front.public_origin,
                pool=self.front.user_pool,
                auth=config.auth,
                resource_url=config.resource_url,
                log_retention_days=config.log_retention_days,
                removal_policy=config.removal,
                reserved_concurrency=config.concurrency.bridge,
            )
            self.bridge.trust_from(self.functions.api_function)
            self.front.throttle_routes(self.bridge.routes, config.sign_in_throttle)
        self.monitoring = Monitoring(
            self,
            "Monitoring",
            api_function=self.functions.api_function,
            worker_function=self.functions.worker_function,
            supervisor_function=self.supervisor.function.function,
            sweeper_function=self.sweeper.function.function,
            state_machine=self.workflow.state_machine,
            table=self.tasks.table,
            http_api=self.front.api,
            alarm_email=config.alarm_email,
            alarm_topic_arn=config.alarm_topic_arn,
            metrics_namespace=config.server_name,  # POWERTOOLS_METRICS_NAMESPACE of both functions
            stream_failures=self.supervisor.stream_failures,
            status_event_failures=self.supervisor.status_event_failures,
        )
        # The code the functions share was staged above: held to the team's ceiling (assetSizeLimitMb).
        self.asset_sizes = bundling.check_function_assets(self, config.asset_size_limit_mb)

        CfnOutput(self, "EndpointUrl", value=self.front.endpoint_url, description="MCP endpoint (HTTP API, OAuth)")
        CfnOutput(self, "TaskTableName", value=self.tasks.table.table_name)
        CfnOutput(self, "StateMachineArn", value=self.workflow.state_machine.state_machine_arn)
        CfnOutput(self, "DashboardName", value=self.monitoring.dashboard.dashboard_name)
        # What `make redrive STACK=...` reads and replays to.
        CfnOutput(self, "StreamFailureQueueUrl", value=self.supervisor.stream_failures.queue_url)
        CfnOutput(self, "SupervisorFunctionName", value=self.supervisor.function.function.function_name)
        if self.front.domain is not None:
            CfnOutput(
                self,
                "CustomDomainTarget",
                value=self.front.domain.regional_domain_name,
                description="Point the custom domain's DNS (CNAME or alias) here",
            )
        if self.front.function_url is not None:
            CfnOutput(self, "FunctionUrl", value=f"{self.front.function_url.url}mcp", description="MCP endpoint (IAM)")
        if self.front.user_pool is not None:
            pool = self.front.user_pool
            CfnOutput(self, "UserPoolId", value=pool.user_pool.user_pool_id)
            CfnOutput(self, "UserPoolClientId", value=pool.client.user_pool_client_id)
            CfnOutput(self, "TokenUrl", value=pool.token_url)
            CfnOutput(self, "TokenScope", value=pool.scope_name)
            CfnOutput(self, "TokenIssuer", value=pool.issuer)
        if self.bridge is not None:
            CfnOutput(
                self,
                "AuthorizationServer",
                value=self.front.public_origin,
                description="OAuth authorization server MCP clients discover (the bridge in front of Cognito)",
            )
