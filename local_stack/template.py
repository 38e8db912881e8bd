"""A synthesized CloudFormation template, read the way CloudFormation would deploy it.

`DeployedTemplate` gives every resource the physical id and attributes CloudFormation would give it
(deterministic names, so a restarted local stack finds the same table), and resolves the intrinsic
functions CDK emits (`Ref`, `Fn::GetAtt`, `Fn::Join`, `Fn::Sub`, `Fn::Select`, `Fn::Split`,
`Fn::If` with conditions, pseudo parameters). Nothing here knows our stack: it reads the template.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

REGION: Final = "us-east-1"
_UPPER_DIGITS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
_LOWER_DIGITS: Final = "abcdefghijklmnopqrstuvwxyz0123456789"
_LETTERS_DIGITS: Final = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
ACCOUNT_ID: Final = "123456789012"  # moto's default account
PARTITION: Final = "aws"
URL_SUFFIX: Final = "amazonaws.com"
NO_VALUE: Final = object()
_SUB_VARIABLE: Final = re.compile(r"\$\{([^}!][^}]*)\}")


class TemplateError(ValueError):
    """The template uses something this reader cannot resolve; the message names it."""


def _suffix(stack_name: str, logical_id: str, length: int = 12, alphabet: str = _UPPER_DIGITS) -> str:
    digest = hashlib.sha256(f"{stack_name}/{logical_id}".encode()).digest()
    return "".join(alphabet[byte % len(alphabet)] for byte in digest[:length])


@dataclass(frozen=True, slots=True)
class Resource:
    logical_id: str
    type: str
    properties: dict[str, Any]
    depends_on: tuple[str, ...] = ()


@dataclass
class DeployedTemplate:
    """The template plus what CloudFormation would know after creating it."""

    template: dict[str, Any]
    stack_name: str
    assembly_dir: Path
    region: str = REGION
    account_id: str = ACCOUNT_ID
    # Physical ids (what `Ref` gives) and attributes that only the provisioner learns (e.g. a secret's ARN).
    physical_ids: dict[str, str] = field(default_factory=dict)
    attributes: dict[tuple[str, str], str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for resource in self.resources():
            self.physical_ids.setdefault(resource.logical_id, self._default_physical_id(resource))

    # ---- reading ----------------------------------------------------------------------------
    @classmethod
    def load(cls, assembly_dir: Path, stack_name: str) -> DeployedTemplate:
        path = assembly_dir / f"{stack_name}.template.json"
        if not path.exists():
            raise TemplateError(f"no template for stack {stack_name!r} in {assembly_dir}")
        return cls(json.loads(path.read_text(encoding="utf-8")), stack_name, assembly_dir)

    def resources(self, resource_type: str | None = None) -> list[Resource]:
        found = []
        for logical_id, body in (self.template.get("Resources") or {}).items():
            if resource_type is None or body.get("Type") == resource_type:
                depends = body.get("DependsOn") or ()
                found.append(
                    Resource(
                        logical_id,
                        str(body.get("Type")),
                        dict(body.get("Properties") or {}),
                        (depends,) if isinstance(depends, str) else tuple(depends),
                    )
                )
        return found

    def resource(self, logical_id: str) -> Resource:
        body = (self.template.get("Resources") or {}).get(logical_id)
        if body is None:
            raise TemplateError(f"the template has no resource {logical_id!r}")
        return Resource(logical_id, str(body.get("Type")), dict(body.get("Properties") or {}))

    def asset_file(self, object_key: str) -> Path:
        """The file CDK publishes under an S3 object key, found through the assembly's asset manifest."""
        manifest = self.assembly_dir / f"{self.stack_name}.assets.json"
        if manifest.exists():
            for asset in (json.loads(manifest.read_text(encoding="utf-8")).get("files") or {}).values():
                keys = {destination.get("objectKey") for destination in (asset.get("destinations") or {}).values()}
                if object_key in keys:
                    path: Path = self.assembly_dir / str(asset["source"]["path"])
                    if path.is_file():
                        return path
        raise TemplateError(f"asset {object_key} is not in {self.assembly_dir}")

    # ---- physical ids and attributes --------------------------------------------------------
    def _generated_name(self, logical_id: str, limit: int = 64) -> str:
        name = f"{self.stack_name}-{logical_id}"[: limit - 13]
        return f"{name}-{_suffix(self.stack_name, logical_id)}"

    def _default_physical_id(self, resource: Resource) -> str:
        props = resource.properties
        kind = resource.type
        if kind == "AWS::DynamoDB::Table":
            return (
                str(self.resolve(props["TableName"]))
                if "TableName" in props
                else self._generated_name(resource.logical_id, 255)
            )
        if kind == "AWS::Lambda::Function":
            return (
                str(self.resolve(props["FunctionName"]))
                if "FunctionName" in props
                else self._generated_name(resource.logical_id)
            )
        if kind == "AWS::IAM::Role":
            return (
                str(self.resolve(props["RoleName"]))
                if "RoleName" in props
                else self._generated_name(resource.logical_id)
            )
        if kind == "AWS::StepFunctions::StateMachine":
            name = (
                str(self.resolve(props["StateMachineName"]))
                if "StateMachineName" in props
                else self._generated_name(resource.logical_id, 80)
            )
            return f"arn:{PARTITION}:states:{self.region}:{self.account_id}:stateMachine:{name}"
        if kind == "AWS::Logs::LogGroup":
            return (
                str(self.resolve(props["LogGroupName"]))
                if "LogGroupName" in props
                else self._generated_name(resource.logical_id, 512)
            )
        if kind == "AWS::SecretsManager::Secret":
            # Replaced by the ARN Secrets Manager returns when the secret is created.
            name = (
                str(self.resolve(props["Name"]))
                if "Name" in props
                else f"{resource.logical_id}-{_suffix(self.stack_name, resource.logical_id)}"
            )
            return f"arn:{PARTITION}:secretsmanager:{self.region}:{self.account_id}:secret:{name}"
        if kind == "AWS::S3::Bucket":
            if "BucketName" in props:
                return str(self.resolve(props["BucketName"]))
            # CloudFormation's generated bucket names: lower case, at most 63 characters.
            prefix = f"{self.stack_name}-{resource.logical_id}".lower()[:49]
            return f"{prefix}-{_suffix(self.stack_name, resource.logical_id, 12, _LOWER_DIGITS)}"
        if kind == "AWS::Cognito::UserPool":
            return f"{self.region}_{_suffix(self.stack_name, resource.logical_id, 9, _LETTERS_DIGITS)}"
        if kind == "AWS::Cognito::UserPoolDomain" and "Domain" in props:
            return str(self.resolve(props["Domain"]))
        if kind == "AWS::Cognito::UserPoolClient":
            return _suffix(self.stack_name, resource.logical_id, 26, _LOWER_DIGITS)
        if kind in (
            "AWS::ApiGatewayV2::Api",
            "AWS::ApiGatewayV2::Authorizer",
            "AWS::ApiGatewayV2::Integration",
            "AWS::ApiGatewayV2::Route",
        ):
            return _suffix(self.stack_name, resource.logical_id, 10, _LOWER_DIGITS)
        return f"{resource.logical_id}-{_suffix(self.stack_name, resource.logical_id)}"

    def physical_id(self, logical_id: str) -> str:
        try:
            return self.physical_ids[logical_id]
        except KeyError:
            raise TemplateError(f"Ref to unknown resource {logical_id!r}") from None

    def name_of(self, logical_id: str) -> str:
        """The resource's name where `Ref` gives an ARN (state machines, secrets)."""
        physical = self.physical_id(logical_id)
        kind = self.resource(logical_id).type
        if kind == "AWS::StepFunctions::StateMachine":
            return physical.rsplit(":", 1)[1]
        if kind == "AWS::SecretsManager::Secret":
            return physical.split(":secret:", 1)[1]
        return physical

    def attribute(self, logical_id: str, name: str) -> str:
        known = self.attributes.get((logical_id, name))
        if known is not None:
            return known
        resource = self.resource(logical_id)
        physical = self.physical_id(logical_id)
        region, account = self.region, self.account_id
        builders: dict[tuple[str, str], Callable[[], str]] = {
            ("AWS::DynamoDB::Table", "Arn"): lambda: f"arn:{PARTITION}:dynamodb:{region}:{account}:table/{physical}",
            ("AWS::IAM::Role", "Arn"): lambda: f"arn:{PARTITION}:iam::{account}:role/{physical}",
            ("AWS::IAM::Role", "RoleId"): lambda: "AROA" + _suffix(self.stack_name, logical_id, 17),
            ("AWS::Lambda::Function", "Arn"): lambda: f"arn:{PARTITION}:lambda:{region}:{account}:function:{physical}",
            ("AWS::Logs::LogGroup", "Arn"): lambda: f"arn:{PARTITION}:logs:{region}:{account}:log-group:{physical}:*",
            ("AWS::StepFunctions::StateMachine", "Arn"): lambda: physical,
            ("AWS::StepFunctions::StateMachine", "Name"): lambda: self.name_of(logical_id),
            ("AWS::SecretsManager::Secret", "Id"): lambda: physical,
            ("AWS::Cognito::UserPool", "ProviderURL"): lambda: f"https://cognito-idp.{region}.{URL_SUFFIX}/{physical}",
            ("AWS::Cognito::UserPool", "ProviderName"): lambda: f"cognito-idp.{region}.{URL_SUFFIX}/{physical}",
            ("AWS::Cognito::UserPool", "Arn"): lambda: (
                f"arn:{PARTITION}:cognito-idp:{region}:{account}:userpool/{physical}"
            ),
            ("AWS::ApiGatewayV2::Api", "ApiEndpoint"): lambda: f"https://{physical}.execute-api.{region}.{URL_SUFFIX}",
            ("AWS::ApiGatewayV2::Api", "ApiId"): lambda: physical,
            ("AWS::Lambda::Url", "FunctionUrl"): lambda: (
                f"https://{_suffix(self.stack_name, logical_id, 32, _LOWER_DIGITS)}.lambda-url.{region}.on.aws/"
            ),
            ("AWS::S3::Bucket", "Arn"): lambda: f"arn:{PARTITION}:s3:::{physical}",
            ("AWS::KMS::Key", "Arn"): lambda: f"arn:{PARTITION}:kms:{region}:{account}:key/{physical}",
            ("AWS::S3::Bucket", "DomainName"): lambda: f"{physical}.s3.{URL_SUFFIX}",
            ("AWS::S3::Bucket", "RegionalDomainName"): lambda: f"{physical}.s3.{region}.{URL_SUFFIX}",
            ("AWS::SNS::Topic", "TopicArn"): lambda: f"arn:{PARTITION}:sns:{region}:{account}:{physical}",
            ("AWS::CloudWatch::Alarm", "Arn"): lambda: (
                f"arn:{PARTITION}:cloudwatch:{region}:{account}:alarm:{physical}"
            ),
        }
        builder = builders.get((resource.type, name))
        if builder is None:
            raise TemplateError(f"Fn::GetAtt {logical_id}.{name} ({resource.type}) is not known to the local stack")
        return builder()

    # ---- intrinsic functions ----------------------------------------------------------------
    def pseudo_parameter(self, name: str) -> Any:
        values: dict[str, Any] = {
            "AWS::Region": self.region,
            "AWS::AccountId": self.account_id,
            "AWS::Partition": PARTITION,
            "AWS::URLSuffix": URL_SUFFIX,
            "AWS::StackName": self.stack_name,
            "AWS::StackId": (
                f"arn:{PARTITION}:cloudformation:{self.region}:{self.account_id}:stack/{self.stack_name}/local"
            ),
            "AWS::NoValue": NO_VALUE,
        }
        if name in values:
            return values[name]
        parameters = self.template.get("Parameters") or {}
        if name in parameters:
            if "Default" not in parameters[name]:
                raise TemplateError(f"parameter {name!r} has no default, and the local stack passes none")
            return parameters[name]["Default"]
        return self.physical_id(name)

    def condition(self, name: str) -> bool:
        conditions = self.template.get("Conditions") or {}
        if name not in conditions:
            raise TemplateError(f"unknown condition {name!r}")
        return bool(self.resolve(conditions[name]))

    def resolve(self, value: Any) -> Any:
        """The value with every intrinsic function evaluated; `AWS::NoValue` entries dropped."""
        if isinstance(value, list):
            items = [self.resolve(item) for item in value]
            return [item for item in items if item is not NO_VALUE]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            ((key, argument),) = value.items()
            function = _INTRINSICS.get(key)
            if function is not None and (key != "Condition" or isinstance(argument, str)):
                return function(self, argument)
            if key.startswith("Fn::"):
                raise TemplateError(f"{key} is not supported by the local stack")
        resolved = {key: self.resolve(item) for key, item in value.items()}
        return {key: item for key, item in resolved.items() if item is not NO_VALUE}

    def _sub(self, argument: Any) -> str:
        if isinstance(argument, str):
            text, variables = argument, {}
        else:
            text, variables = argument[0], self.resolve(argument[1])

        def replace(found: re.Match[str]) -> str:
            name = found.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name:
                logical_id, attribute = name.split(".", 1)
                return self.attribute(logical_id, attribute)
            return str(self.pseudo_parameter(name))

        return _SUB_VARIABLE.sub(replace, text).replace("${!", "${")


def _get_att(template: DeployedTemplate, argument: Any) -> str:
    if isinstance(argument, str):
        logical_id, name = argument.split(".", 1)
    else:
        logical_id, name = argument[0], template.resolve(argument[1])
    return template.attribute(logical_id, str(name))


def _join(template: DeployedTemplate, argument: Any) -> str:
    separator, items = argument
    return str(separator).join(str(item) for item in template.resolve(items))


def _select(template: DeployedTemplate, argument: Any) -> Any:
    index, items = template.resolve(argument)
    return items[int(index)]


def _split(template: DeployedTemplate, argument: Any) -> list[str]:
    separator, text = template.resolve(argument)
    return str(text).split(str(separator))


def _if(template: DeployedTemplate, argument: Any) -> Any:
    name, when_true, when_false = argument
    return template.resolve(when_true if template.condition(name) else when_false)


def _equals(template: DeployedTemplate, argument: Any) -> bool:
    left, right = template.resolve(argument)
    return bool(left == right)


def _not(template: DeployedTemplate, argument: Any) -> bool:
    return not template.resolve(argument)[0]


def _and(template: DeployedTemplate, argument: Any) -> bool:
    return all(template.resolve(argument))


def _or(template: DeployedTemplate, argument: Any) -> bool:
    return any(template.resolve(argument))


def _condition(template: DeployedTemplate, argument: Any) -> bool:
    return template.condition(str(argument))


_INTRINSICS: Final[Mapping[str, Callable[[DeployedTemplate, Any], Any]]] = {
    "Ref": lambda template, name: template.pseudo_parameter(str(name)),
    "Fn::GetAtt": _get_att,
    "Fn::Join": _join,
    "Fn::Sub": lambda template, argument: template._sub(argument),
    "Fn::Select": _select,
    "Fn::Split": _split,
    "Fn::If": _if,
    "Fn::Equals": _equals,
    "Fn::Not": _not,
    "Fn::And": _and,
    "Fn::Or": _or,
    "Condition": _condition,
}
