"""Principals come from the front only, and two different callers never map to the same principal id.

Complements test_lambda_adapter.py (which reads each kind of principal): here, ids are collision-free
across kinds and across the subject/client split, and nothing a caller writes in the body, `_meta`
or an extra header changes who they are.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from testkit import api_event, rpc

from mcp_runtime.context import ANONYMOUS
from mcp_runtime.lambda_http import principal_from_event, request_from_event


def jwt_event(claims: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
    event = api_event(rpc("tools/list"), headers=headers)
    event["requestContext"]["authorizer"] = {"jwt": {"claims": claims, "scopes": ["mcp"]}}
    return event


def jwt_principal(claims: dict[str, Any]) -> str:
    principal = principal_from_event(jwt_event(claims), {}, dev_auth=False)
    assert principal is not None
    return principal.id


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ({"sub": "a|b", "client_id": "c"}, {"sub": "a", "client_id": "b|c"}),
        ({"sub": "auth0|123", "client_id": "app"}, {"sub": "auth0", "client_id": "123|app"}),
        ({"sub": "a%7Cb", "client_id": "c"}, {"sub": "a|b", "client_id": "c"}),
        ({"sub": "a", "client_id": "b%7Cc"}, {"sub": "a", "client_id": "b|c"}),
        ({"sub": "u", "client_id": "app-1"}, {"sub": "u", "client_id": "app-2"}),
    ],
    ids=["bar-moved", "auth0-style", "escaped-vs-raw-subject", "escaped-vs-raw-client", "same-user-other-client"],
)
def test_different_subject_client_pairs_never_share_a_principal(one: dict[str, Any], other: dict[str, Any]) -> None:
    assert jwt_principal(one) != jwt_principal(other)


def test_a_subject_with_a_bar_keeps_a_stable_readable_id() -> None:
    assert jwt_principal({"iss": "https://a.example", "sub": "auth0|123", "client_id": "app"}) == (
        "jwt:https://a.example|auth0%7C123|app"
    )


def test_one_subject_and_client_from_two_issuers_are_two_principals() -> None:
    one = {"iss": "https://idp-one.example", "sub": "1234", "client_id": "app"}
    assert jwt_principal(one) != jwt_principal({**one, "iss": "https://idp-two.example"})


def iam_principals(binding: Any, *keys: str) -> list[str]:
    session = {"userArn": "arn:aws:sts::123456789012:assumed-role/caller/ci", "callerId": "AROAEXAMPLE:ci"}
    principals = []
    for key in keys:
        event = api_event(rpc("tools/list"))
        event["requestContext"]["authorizer"] = {"iam": {**session, "accessKey": key}}
        principal = principal_from_event(event, {}, dev_auth=False, iam_binding=binding)
        assert principal is not None
        principals.append(principal.id)
    return principals


def test_a_role_session_whose_credentials_were_refreshed_is_the_same_principal() -> None:
    assert (
        iam_principals("session", "ASIAFIRSTKEY", "ASIAREFRESHEDKEY")
        == ["iam:arn:aws:sts::123456789012:assumed-role/caller/ci"] * 2
    )


def test_bound_to_the_access_key_two_sessions_of_one_role_with_one_session_name_are_two_principals() -> None:
    first, second = iam_principals("access-key", "ASIAFIRSTSESSION", "ASIASECONDSESSION")
    assert first == "iam:arn:aws:sts::123456789012:assumed-role/caller/ci|ASIAFIRSTSESSION"
    assert first != second


@pytest.mark.parametrize(
    "event_principal",
    [
        ("jwt", {"sub": "alice"}),
        ("iam", {"userArn": "alice"}),
    ],
)
def test_kinds_are_prefixed_so_a_dev_name_cannot_equal_a_jwt_or_iam_principal(event_principal: Any) -> None:
    kind, values = event_principal
    event = api_event(rpc("tools/list"))
    event["requestContext"]["authorizer"] = {kind: {"claims": values} if kind == "jwt" else values}
    principal = principal_from_event(event, {}, dev_auth=False)
    dev = request_from_event(api_event(rpc("tools/list"), headers={"authorization": "Bearer dev:alice"}), dev_auth=True)
    assert principal is not None and dev.principal is not None
    assert principal.id != dev.principal.id and principal.id.startswith(f"{kind}:")


def test_a_dev_bearer_is_ignored_when_dev_auth_is_off() -> None:
    event = jwt_event({"sub": "mallory", "client_id": "app"}, headers={"authorization": "Bearer dev:alice"})
    assert request_from_event(event, dev_auth=False).principal is not None
    assert request_from_event(event, dev_auth=False).principal.id == "jwt:-|mallory|app"  # type: ignore[union-attr]
    bare = api_event(rpc("tools/list"), headers={"authorization": "Bearer dev:alice"})
    assert request_from_event(bare, dev_auth=False, require_principal=True).principal is None
    assert request_from_event(bare, dev_auth=False).principal == ANONYMOUS


def test_nothing_in_the_body_meta_or_other_headers_names_the_principal() -> None:
    message = rpc("tools/list", {"principal": "dev:alice"})
    message["params"]["_meta"]["principal"] = "dev:alice"
    message["params"]["_meta"]["io.modelcontextprotocol/principal"] = "dev:alice"
    headers = {
        "authorization": "Bearer dev:mallory",
        "x-principal": "dev:alice",
        "x-amzn-oidc-identity": "alice",
        "x-forwarded-user": "alice",
    }
    event = api_event(json.dumps(message), headers=headers)
    assert request_from_event(event, dev_auth=True).principal.id == "dev:mallory"  # type: ignore[union-attr]
    event["requestContext"]["authorizer"] = {"jwt": {"claims": {"sub": "mallory", "client_id": "app"}}}
    assert request_from_event(event, dev_auth=False).principal.id == "jwt:-|mallory|app"  # type: ignore[union-attr]
