"""What a team gives its tools from `cdk.json` (docs/configuration.md, "Configure your tools"), on the
two functions that run tools: the API (plain, MRTR and handle tools, a task tool's prepare step, a
task tool called without the tasks extension) and the worker (task tools).

- `toolEnvironment`: variables added to both functions' environment (`infra/config.py` refuses the
  template's own names, so none is replaced).
- `toolSecrets`: `GetSecretValue` on exactly those secrets, and their names for `ctx.secret` in
  `MCP_TOOL_SECRETS`; the secrets themselves are the team's, never created here.
- `toolPolicyStatements`: the statements, as written, on both roles; a wildcard is acknowledged to
  cdk-nag with the statement's own `reason`.
- `vpc`: both functions in the given subnets and security groups (imported by id: nothing is looked
  up, so the synth stays offline), with the VPC endpoints the template's own calls need unless the
  VPC has them or routes to a NAT gateway (`createEndpoints: false`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from aws_cdk import ArnFormat, Aws, Fn, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from infra.capabilities._lambda import McpFunction, grant
from infra.config import ToolConfig, ToolVpc
from infra.nag import acknowledge

# The variable `mcp_runtime.settings.Settings.tool_secrets` reads: name -> the secret's name or ARN (JSON).
TOOL_SECRETS_VARIABLE: Final = "MCP_TOOL_SECRETS"
SECRET_ACTIONS: Final = ("secretsmanager:GetSecretValue",)
# What Lambda needs to attach a function to a VPC: AWSLambdaVPCAccessExecutionRole's actions, which
# have no resource-level permissions (the managed policy grants them on "*" too).
VPC_ACCESS_ACTIONS: Final = (
    "ec2:AssignPrivateIpAddresses",
    "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface",
    "ec2:DescribeNetworkInterfaces",
    "ec2:DescribeSubnets",
    "ec2:UnassignPrivateIpAddresses",
)
# The services the template's own calls reach from inside the VPC: the task table and the payload
# bucket (gateway endpoints, free), the workflow and the sealing and tool secrets (interface
# endpoints). Logs and metrics (EMF) leave through Lambda itself, not the function's network.
GATEWAY_ENDPOINT_SERVICES: Final = ("dynamodb", "s3")
INTERFACE_ENDPOINT_SERVICES: Final = ("states", "secretsmanager")
_ENDPOINT_IDS: Final = {
    "dynamodb": "DynamoDb",
    "s3": "S3",
    "states": "StepFunctions",
    "secretsmanager": "SecretsManager",
}


def secret_resource(stack: Stack, secret: str) -> str:
    """The ARN IAM matches a secret by: its ARN as given, or, for a name, the ARN with the six random
    characters Secrets Manager appends (`-??????`)."""
    if secret.startswith("arn:"):
        return secret
    return stack.format_arn(
        service="secretsmanager",
        resource="secret",
        resource_name=f"{secret}-??????",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


class ToolAccess(Construct):
    """The tools' environment, secrets, IAM statements and network, on the functions that run tools."""

    def __init__(self, scope: Construct, construct_id: str, *, config: ToolConfig, functions: Sequence[McpFunction]):
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        secret_resources = sorted({secret_resource(stack, secret) for secret in config.secrets.values()})
        for function in functions:
            for name, value in config.environment.items():
                function.function.add_environment(name, value)
            if config.secrets:
                secrets = json.dumps(dict(config.secrets), sort_keys=True, separators=(",", ":"))
                function.function.add_environment(TOOL_SECRETS_VARIABLE, secrets)
                grant(function.role, SECRET_ACTIONS, secret_resources)
            for statement in config.policy_statements:
                function.role.add_to_principal_policy(iam.PolicyStatement.from_json(dict(statement.statement)))
                for wildcard in statement.wildcards:
                    assert statement.reason is not None  # infra/config.py refuses a wildcard without one
                    acknowledge(function.role, f"AwsSolutions-IAM5[{wildcard}]", statement.reason)
            if config.vpc is not None:
                self._attach(function, config.vpc)
        if config.vpc is not None and config.vpc.create_endpoints:
            self._endpoints(config.vpc)

    @staticmethod
    def _attach(function: McpFunction, vpc: ToolVpc) -> None:
        """The function in the subnets and security groups, by id: an L2 VPC needs availability zones,
        which only a lookup (credentials at synth) would give."""
        resource = function.function.node.default_child
        assert isinstance(resource, lambda_.CfnFunction)
        resource.vpc_config = lambda_.CfnFunction.VpcConfigProperty(
            subnet_ids=list(vpc.subnet_ids), security_group_ids=list(vpc.security_group_ids)
        )
        grant(function.role, VPC_ACCESS_ACTIONS, ["*"])
        acknowledge(
            function.role,
            "AwsSolutions-IAM5[Resource::*]",
            "Lambda attaches the function to its VPC with these EC2 network-interface actions, which have no "
            "resource-level permissions (AWSLambdaVPCAccessExecutionRole grants them on * as well).",
        )

    def _endpoints(self, vpc: ToolVpc) -> None:
        assert vpc.vpc_id is not None  # infra/config.py asks for it with createEndpoints
        group = ec2.CfnSecurityGroup(
            self,
            "EndpointSecurityGroup",
            group_description="HTTPS from the MCP functions to the VPC endpoints of their AWS calls",
            vpc_id=vpc.vpc_id,
            security_group_ingress=[
                ec2.CfnSecurityGroup.IngressProperty(
                    ip_protocol="tcp",
                    from_port=443,
                    to_port=443,
                    source_security_group_id=source,
                    description="HTTPS from the MCP functions",
                )
                for source in vpc.security_group_ids
            ],
        )
        for service in GATEWAY_ENDPOINT_SERVICES:
            ec2.CfnVPCEndpoint(
                self,
                f"{_ENDPOINT_IDS[service]}Endpoint",
                vpc_id=vpc.vpc_id,
                service_name=Fn.join("", ["com.amazonaws.", Aws.REGION, f".{service}"]),
                vpc_endpoint_type="Gateway",
                route_table_ids=list(vpc.route_table_ids),
            )
        for service in INTERFACE_ENDPOINT_SERVICES:
            ec2.CfnVPCEndpoint(
                self,
                f"{_ENDPOINT_IDS[service]}Endpoint",
                vpc_id=vpc.vpc_id,
                service_name=Fn.join("", ["com.amazonaws.", Aws.REGION, f".{service}"]),
                vpc_endpoint_type="Interface",
                subnet_ids=list(vpc.subnet_ids),
                security_group_ids=[group.attr_group_id],
                private_dns_enabled=True,
            )
