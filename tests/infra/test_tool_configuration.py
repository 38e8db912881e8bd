"""What cdk.json gives the tools (issue 30 item 4) is what the template says, on the API and the worker only:
`toolEnvironment`, `toolSecrets`, `toolPolicyStatements` and `vpc` (docs/configuration.md)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk.assertions import Capture, Match
from infra.capabilities.tool_access import (
    GATEWAY_ENDPOINT_SERVICES,
    INTERFACE_ENDPOINT_SERVICES,
    TOOL_SECRETS_VARIABLE,
    VPC_ACCESS_ACTIONS,
)
from infra.config import check_tool_variable

from mcp_runtime.settings import Settings
from tests.infra.conftest import TOOL_CONFIGURATION, Synthesized

pytestmark = pytest.mark.infra

SECRET_BY_NAME = {
    "Fn::Join": [
        "",
        [
            "arn:",
            {"Ref": "AWS::Partition"},
            ":secretsmanager:",
            {"Ref": "AWS::Region"},
            ":",
            {"Ref": "AWS::AccountId"},
            ":secret:acme/weather-api-key-??????",
        ],
    ]
}
SECRET_BY_ARN = "arn:aws:secretsmanager:eu-west-1:111122223333:secret:ledger-AbCdEf"


@pytest.fixture(scope="module")
def configured(synth: Any) -> Synthesized:
    return synth(**TOOL_CONFIGURATION)


def _function(stack: Synthesized, name: str) -> dict[str, Any]:
    construct = {
        "api": stack.stack.functions.api_function,
        "worker": stack.stack.functions.worker_function,
        "supervisor": stack.stack.supervisor.function.function,
        "sweeper": stack.stack.sweeper.function.function,
        "callbacks": stack.stack.callbacks.function.function,
    }[name]
    return stack.json["Resources"][stack.logical_id(construct)]["Properties"]


def _statements(stack: Synthesized, name: str) -> list[dict[str, Any]]:
    role = {"api": stack.stack.functions.api.role, "worker": stack.stack.functions.worker.role}[name]
    role_id = stack.logical_id(role)
    return [
        statement
        for policy in stack.resources("AWS::IAM::Policy").values()
        if {"Ref": role_id} in policy["Properties"]["Roles"]
        for statement in policy["Properties"]["PolicyDocument"]["Statement"]
    ]


# ---- toolEnvironment ----------------------------------------------------------------------------
def test_tool_environment_is_set_on_the_api_and_the_worker_and_no_other_function(configured: Synthesized) -> None:
    for name in ("api", "worker"):
        variables = _function(configured, name)["Environment"]["Variables"]
        assert variables["WEATHER_API_URL"] == "https://weather.example.com/v2"
        assert variables["REPORT_LIMIT"] == "10"
    for name in ("supervisor", "sweeper", "callbacks"):
        variables = _function(configured, name)["Environment"]["Variables"]
        assert not {"WEATHER_API_URL", "REPORT_LIMIT", TOOL_SECRETS_VARIABLE} & set(variables)


def test_every_variable_the_template_sets_or_the_runtime_reads_is_refused_as_a_tool_variable(
    configured: Synthesized,
) -> None:
    own = {
        name
        for function in configured.resources("AWS::Lambda::Function").values()
        for name in function["Properties"].get("Environment", {}).get("Variables", {})
        if name not in TOOL_CONFIGURATION["toolEnvironment"]
    }
    own |= {field.alias for field in Settings.model_fields.values() if field.alias}
    assert {"MCP_TOOL_SECRETS", "TASK_TABLE_NAME", "PYDANTIC_DISABLE_PLUGINS", "DEV_AUTH"} <= own
    for name in sorted(own):
        with pytest.raises(ValueError, match=re.escape(f"{name!r} is one of the template's own variables")):
            check_tool_variable(name)


def test_context_given_as_text_with_dash_c_is_read_as_json(synth: Any) -> None:
    stack = synth(toolEnvironment='{"FEATURE_FLAGS": "beta,fast"}')
    assert _function(stack, "worker")["Environment"]["Variables"]["FEATURE_FLAGS"] == "beta,fast"


# ---- toolSecrets --------------------------------------------------------------------------------
def test_tool_secrets_reach_the_functions_by_name_and_only_those_secrets_are_readable(
    configured: Synthesized,
) -> None:
    captured = Capture()
    configured.template.has_resource_properties(
        "AWS::Lambda::Function",
        {
            "Handler": "app.handlers.worker_handler",
            "Environment": {"Variables": Match.object_like({TOOL_SECRETS_VARIABLE: captured})},
        },
    )
    # What the runtime reads (ctx.secret's map), exactly what cdk.json says.
    assert Settings.from_environ({TOOL_SECRETS_VARIABLE: captured.as_string()}).tool_secrets == {
        "weather": "acme/weather-api-key",
        "ledger": SECRET_BY_ARN,
    }
    for name in ("api", "worker"):
        assert _function(configured, name)["Environment"]["Variables"][TOOL_SECRETS_VARIABLE] == captured.as_string()
        sealing = {"Ref": configured.logical_id(configured.stack.sealing.secret)}  # the API's own secret
        reads = [s for s in _statements(configured, name) if "secretsmanager:" in json.dumps(s["Action"])]
        tool_reads = [s for s in reads if s["Resource"] != sealing]
        # A name: its ARN with the six characters Secrets Manager appends; an ARN: as given.
        assert tool_reads == [
            {"Action": "secretsmanager:GetSecretValue", "Effect": "Allow", "Resource": [SECRET_BY_NAME, SECRET_BY_ARN]}
        ]


def test_no_tool_secrets_means_no_variable_and_no_grant(default_stack: Synthesized) -> None:
    for name in ("api", "worker"):
        assert TOOL_SECRETS_VARIABLE not in _function(default_stack, name)["Environment"]["Variables"]
    assert not [s for s in _statements(default_stack, "worker") if "secretsmanager" in json.dumps(s["Action"])]


# ---- toolPolicyStatements -----------------------------------------------------------------------
def test_tool_policy_statements_are_on_both_roles_as_written_without_their_reason(configured: Synthesized) -> None:
    for name in ("api", "worker"):
        role_id = configured.logical_id(getattr(configured.stack.functions, name).role)
        configured.template.has_resource_properties(
            "AWS::IAM::Policy",
            {
                "Roles": [{"Ref": role_id}],
                "PolicyDocument": {
                    "Statement": Match.array_with(
                        [
                            {
                                "Action": "s3:GetObject",
                                "Effect": "Allow",
                                "Resource": "arn:aws:s3:::acme-reports/latest.csv",
                            },
                            {
                                "Action": ["s3:GetObject", "s3:ListBucket"],
                                "Effect": "Allow",
                                "Resource": ["arn:aws:s3:::acme-archive", "arn:aws:s3:::acme-archive/*"],
                            },
                        ]
                    )
                },
            },
        )


def test_a_wildcard_statement_is_acknowledged_to_cdk_nag_with_its_own_reason(configured: Synthesized) -> None:
    reason = TOOL_CONFIGURATION["toolPolicyStatements"][1]["reason"]
    acknowledged = {(a.path, a.rule_id) for a in configured.acknowledged if a.reason == reason}
    assert acknowledged == {
        (
            getattr(configured.stack.functions, name).role.node.path,
            "AwsSolutions-IAM5[Resource::arn:aws:s3:::acme-archive/*]",
        )
        for name in ("api", "worker")
    }


def test_a_deny_with_wildcards_needs_no_reason_and_is_acknowledged_nowhere(synth: Any) -> None:
    deny = {"Effect": "Deny", "Action": "s3:Delete*", "Resource": "*"}
    stack = synth(toolPolicyStatements=[deny])
    assert deny in _statements(stack, "worker")
    assert not [a for a in stack.acknowledged if "s3:Delete" in a.rule_id]


# ---- vpc ----------------------------------------------------------------------------------------
def test_the_tool_running_functions_are_placed_in_the_vpc_and_may_attach_to_it(configured: Synthesized) -> None:
    vpc = TOOL_CONFIGURATION["vpc"]
    for name in ("api", "worker"):
        assert _function(configured, name)["VpcConfig"] == {
            "SubnetIds": vpc["subnetIds"],
            "SecurityGroupIds": vpc["securityGroupIds"],
        }
        assert {"Action": sorted(VPC_ACCESS_ACTIONS), "Effect": "Allow", "Resource": "*"} in _statements(
            configured, name
        )
    for name in ("supervisor", "sweeper", "callbacks"):
        assert "VpcConfig" not in _function(configured, name)


def test_the_vpc_is_imported_by_id_so_the_synth_looks_nothing_up(configured: Synthesized) -> None:
    """A lookup (Vpc.from_lookup and the like) would need credentials at synth; the CDK lists those it
    still needs as the assembly's missing context."""
    configured.app.synth()
    manifest = json.loads((configured.outdir / "manifest.json").read_text())
    assert manifest["artifacts"]  # the assembly is there, and it asks for nothing:
    assert "missing" not in manifest


def test_the_vpc_gets_the_endpoints_of_the_templates_own_calls(configured: Synthesized) -> None:
    vpc = TOOL_CONFIGURATION["vpc"]
    endpoints = configured.resources("AWS::EC2::VPCEndpoint")
    services = {
        endpoint["Properties"]["ServiceName"]["Fn::Join"][1][2].lstrip("."): endpoint["Properties"]
        for endpoint in endpoints.values()
    }
    assert sorted(services) == sorted(GATEWAY_ENDPOINT_SERVICES + INTERFACE_ENDPOINT_SERVICES)
    assert sorted(services) == ["dynamodb", "s3", "secretsmanager", "states"]
    group = Capture()
    for service in GATEWAY_ENDPOINT_SERVICES:
        configured.template.has_resource_properties(
            "AWS::EC2::VPCEndpoint",
            {
                "VpcEndpointType": "Gateway",
                "VpcId": vpc["vpcId"],
                "RouteTableIds": vpc["routeTableIds"],
                "ServiceName": {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, f".{service}"]]},
            },
        )
    for service in INTERFACE_ENDPOINT_SERVICES:
        configured.template.has_resource_properties(
            "AWS::EC2::VPCEndpoint",
            {
                "VpcEndpointType": "Interface",
                "VpcId": vpc["vpcId"],
                "SubnetIds": vpc["subnetIds"],
                "PrivateDnsEnabled": True,
                "SecurityGroupIds": [{"Fn::GetAtt": [group, "GroupId"]}],
                "ServiceName": {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, f".{service}"]]},
            },
        )
    # The endpoints take HTTPS from the functions' security groups, and nothing else.
    endpoint_group = configured.json["Resources"][group.as_string()]
    assert endpoint_group["Type"] == "AWS::EC2::SecurityGroup"
    assert endpoint_group["Properties"]["VpcId"] == vpc["vpcId"]
    assert endpoint_group["Properties"]["SecurityGroupIngress"] == [
        {
            "IpProtocol": "tcp",
            "FromPort": 443,
            "ToPort": 443,
            "SourceSecurityGroupId": "sg-0123456789abcdef0",
            "Description": "HTTPS from the MCP functions",
        }
    ]


def test_a_vpc_with_its_own_endpoints_or_a_nat_route_gets_no_endpoints_and_needs_no_vpc_id(synth: Any) -> None:
    stack = synth(
        vpc={
            "subnetIds": ["subnet-0123456789abcdef0"],
            "securityGroupIds": ["sg-0123456789abcdef0"],
            "createEndpoints": False,
        }
    )
    stack.template.resource_count_is("AWS::EC2::VPCEndpoint", 0)
    stack.template.resource_count_is("AWS::EC2::SecurityGroup", 0)
    assert _function(stack, "api")["VpcConfig"] == {
        "SubnetIds": ["subnet-0123456789abcdef0"],
        "SecurityGroupIds": ["sg-0123456789abcdef0"],
    }


def test_without_the_keys_the_template_has_no_vpc_and_no_tool_grants(default_stack: Synthesized) -> None:
    default_stack.template.resource_count_is("AWS::EC2::VPCEndpoint", 0)
    default_stack.template.resource_count_is("AWS::EC2::SecurityGroup", 0)
    for function in default_stack.resources("AWS::Lambda::Function").values():
        assert "VpcConfig" not in function["Properties"]


# ---- what is refused ----------------------------------------------------------------------------
SUBNETS = ["subnet-0123456789abcdef0"]
GROUPS = ["sg-0123456789abcdef0"]


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"toolEnvironment": '["A"]'}, "context 'toolEnvironment' must be a JSON object, got ['A']"),
        ({"toolEnvironment": "A=b"}, "context 'toolEnvironment' must be a JSON object, got 'A=b'"),
        (
            {"toolEnvironment": {"TASK_TABLE_NAME": "mine"}},
            "context 'toolEnvironment': 'TASK_TABLE_NAME' is one of the template's own variables",
        ),
        ({"toolEnvironment": {"AWS_REGION": "eu-west-1"}}, "'AWS_REGION' is one of the template's own variables"),
        ({"toolEnvironment": {"my-var": "x"}}, "'my-var' is not a variable name Lambda accepts"),
        (
            {"toolEnvironment": {"CERTIFICATE": "x" * 4090}},
            "context 'toolEnvironment' holds 4101 bytes; Lambda allows 4096 for all of a function's variables",
        ),
        (
            {"toolEnvironment": {"PORT": 8080}},
            """context 'toolEnvironment': the value of 'PORT' must be a string, got 8080 (quote it: "8080")""",
        ),
        ({"toolSecrets": {"db password": "prod/db"}}, "context 'toolSecrets': 'db password' is not a secret's name"),
        ({"toolSecrets": {"db": "arn:aws:s3:::bucket"}}, "context 'toolSecrets': the secret of 'db' must be"),
        ({"toolSecrets": {"db": 42}}, "context 'toolSecrets': the secret of 'db' must be"),
        ({"toolPolicyStatements": {"Effect": "Allow"}}, "context 'toolPolicyStatements' must be a JSON list"),
        (
            {
                "toolPolicyStatements": [
                    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "*", "Principal": "*"}
                ]
            },
            "context 'toolPolicyStatements'[0] has ['Principal']: a statement takes Sid, Effect, Action, Resource, "
            "Condition, reason",
        ),
        (
            {"toolPolicyStatements": [{"Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/k"}]},
            """context 'toolPolicyStatements'[0]: 'Effect' must be "Allow" or "Deny", got None""",
        ),
        (
            {"toolPolicyStatements": [{"Effect": "Allow", "Action": [], "Resource": "arn:aws:s3:::b/k"}]},
            "context 'toolPolicyStatements'[0]: 'Action' must be a string or a non-empty list of strings, got []",
        ),
        (
            {"toolPolicyStatements": [{"Effect": "Allow", "Action": "GetObject", "Resource": "arn:aws:s3:::b/k"}]},
            "context 'toolPolicyStatements'[0]: ['GetObject'] are not IAM actions",
        ),
        (
            {"toolPolicyStatements": [{"Effect": "Allow", "Action": "s3:Get*", "Resource": "arn:aws:s3:::b/*"}]},
            "context 'toolPolicyStatements'[0] allows wildcards (s3:Get*, arn:aws:s3:::b/*), which cdk-nag "
            '(AwsSolutions-IAM5) refuses unless you say why: add "reason": "..." to the statement',
        ),
        (
            {
                "toolPolicyStatements": [
                    {"Effect": "Allow", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::b/*", "reason": "needed"}
                ]
            },
            "context 'toolPolicyStatements'[0]: 'reason' must say why in 40 characters or more, got 'needed'",
        ),
        ({"vpc": {"subnetIds": SUBNETS}}, "context 'vpc' needs 'subnetIds' and 'securityGroupIds'"),
        ({"vpc": {"subnets": SUBNETS}}, "context 'vpc' has ['subnets']: it takes subnetIds, securityGroupIds, vpcId"),
        (
            {"vpc": {"subnetIds": ["subnet-1"], "securityGroupIds": GROUPS}},
            "context 'vpc': 'subnetIds' must be a list of ids such as subnet-0123456789abcdef0, got ['subnet-1']",
        ),
        (
            {"vpc": {"subnetIds": SUBNETS, "securityGroupIds": GROUPS}},
            "context 'vpc': creating the endpoints (createEndpoints, true by default) needs 'vpcId' and "
            "'routeTableIds'",
        ),
        (
            {"vpc": {"subnetIds": SUBNETS, "securityGroupIds": GROUPS, "createEndpoints": "sometimes"}},
            "context 'vpc.createEndpoints' must be true or false, got 'sometimes'",
        ),
        ({"toolSecret": {"a": "b"}}, "unknown context key 'toolSecret' (did you mean 'toolSecrets'?)"),
    ],
)
def test_bad_tool_configuration_stops_the_synth_with_a_clear_message(
    synth: Any, context: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        synth(**context)
