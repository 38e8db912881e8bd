"""The dashboard graphs every metric the server emits, in the namespace the functions write to, with
the exact dimension sets the code uses (`mcp_runtime.observability.METRIC_DIMENSIONS`)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk.assertions import Capture, Match

from mcp_runtime import observability as obs
from mcp_runtime import wire
from tests.infra.conftest import Synthesized

pytestmark = pytest.mark.infra

SEARCH = re.compile(r"""SEARCH\('\{"(?P<namespace>[^"]+)",(?P<dimensions>[^}]*)\} MetricName="(?P<metric>[^"]+)"'""")


def _flatten(value: Any) -> str:
    """The dashboard body as text: Fn::Join parts joined, each token (Ref, GetAtt) as a placeholder."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        separator, parts = value["Fn::Join"]
        return str(separator).join(_flatten(part) for part in parts)
    return "TOKEN"


def _dashboard_body(stack: Synthesized) -> dict[str, Any]:
    body = Capture()
    stack.template.has_resource_properties("AWS::CloudWatch::Dashboard", {"DashboardBody": body})
    document: dict[str, Any] = json.loads(_flatten(body.as_object()))
    return document


def _expressions(document: dict[str, Any]) -> list[str]:
    found = []
    for widget in document["widgets"]:
        for metric in widget.get("properties", {}).get("metrics", []):
            for item in metric:
                if isinstance(item, dict) and "expression" in item:
                    found.append(item["expression"])
    return found


def _namespace(stack: Synthesized) -> str:
    namespaces = {
        function["Properties"]["Environment"]["Variables"]["POWERTOOLS_METRICS_NAMESPACE"]
        for function in stack.resources("AWS::Lambda::Function").values()
        if "POWERTOOLS_METRICS_NAMESPACE" in function["Properties"]["Environment"]["Variables"]
    }
    assert len(namespaces) == 1, (
        namespaces
    )  # both task functions write to one namespace (the bridge names its own, the same)
    namespace: str = namespaces.pop()
    return namespace


def test_the_dashboard_searches_every_metric_with_its_exact_dimensions_in_the_functions_namespace(
    default_stack: Synthesized,
) -> None:
    searched = set()
    namespaces = set()
    for expression in _expressions(_dashboard_body(default_stack)):
        for match in SEARCH.finditer(expression):
            namespaces.add(match["namespace"])
            searched.add((match["metric"], tuple(sorted(match["dimensions"].split(",")))))
    assert namespaces == {_namespace(default_stack)}
    declared = {(metric, dims) for metric, sets in obs.METRIC_DIMENSIONS.items() for dims in sets}
    assert searched == declared


def test_the_dashboard_body_names_each_metric(default_stack: Synthesized) -> None:
    text = json.dumps(_dashboard_body(default_stack))
    for metric in obs.ALL_METRICS:
        assert f'MetricName=\\"{metric}\\"' in text, metric


def test_answers_with_internal_errors_raise_an_alarm(default_stack: Synthesized) -> None:
    default_stack.template.has_resource_properties(
        "AWS::CloudWatch::Alarm",
        Match.object_like(
            {
                "Namespace": _namespace(default_stack),
                "MetricName": obs.REJECTED_REQUESTS,
                "Dimensions": [{"Name": "code", "Value": str(wire.INTERNAL_ERROR)}],
                "Statistic": "Sum",
                "Threshold": 1,
            }
        ),
    )
