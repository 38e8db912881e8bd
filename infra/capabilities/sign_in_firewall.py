"""A per-source rate rule in front of the sign-in (issue 36 item 5): an AWS WAF web ACL on the Cognito
user pool, with one rate-based rule that blocks a source address sending more than `rate_limit`
requests in five minutes.

Why on the user pool, and not on the HTTP API: AWS WAF web ACLs can be associated with API Gateway
REST APIs, Application Load Balancers, AppSync GraphQL APIs, Cognito user pools, App Runner services,
Verified Access instances, Amplify apps (REGIONAL scope) and CloudFront distributions (CLOUDFRONT scope,
made in us-east-1), but not with an API Gateway HTTP API (docs.aws.amazon.com/waf/latest/developerguide/
web-acl-associating-aws-resource.html). On the user pool it covers what strangers can reach of Cognito: the
managed login pages and the OAuth endpoints of its domain (a flood of one address there could otherwise use
up the pool's request quotas, and every sign-in with them). `/mcp` and the bridge are covered by the HTTP
API's per-route throttles (`HttpFront.throttle_routes`), the bridge's own per-address registration limits
and its reserved concurrency; a per-source rule for them needs CloudFront in front of the HTTP API with a
CLOUDFRONT-scope web ACL (docs/security.md).
"""

from __future__ import annotations

from aws_cdk import aws_wafv2 as wafv2
from constructs import Construct

# The rule counts over five minutes (WAF also offers 60, 120 and 600 s; its lowest limit is 10).
EVALUATION_WINDOW_SECONDS = 300
RULE_NAME = "PerSourceRate"


def _visibility(metric_name: str) -> wafv2.CfnWebACL.VisibilityConfigProperty:
    return wafv2.CfnWebACL.VisibilityConfigProperty(
        cloud_watch_metrics_enabled=True, metric_name=metric_name, sampled_requests_enabled=True
    )


class SignInFirewall(Construct):
    """A REGIONAL web ACL (allow by default) with one rate-based rule keyed on the source IP, associated
    with the user pool. $5 a month for the web ACL, $1 for the rule, $0.60 per million requests (docs/cost.md)."""

    def __init__(self, scope: Construct, construct_id: str, *, user_pool_arn: str, rate_limit: int) -> None:
        super().__init__(scope, construct_id)
        self.web_acl = wafv2.CfnWebACL(
            self,
            "WebAcl",
            scope="REGIONAL",
            default_action=wafv2.CfnWebACL.DefaultActionProperty(allow={}),
            description="Per-source rate limit on the Cognito user pool: its managed login and OAuth endpoints",
            visibility_config=_visibility("SignIn"),
            rules=[
                wafv2.CfnWebACL.RuleProperty(
                    name=RULE_NAME,
                    priority=0,
                    action=wafv2.CfnWebACL.RuleActionProperty(block={}),
                    statement=wafv2.CfnWebACL.StatementProperty(
                        rate_based_statement=wafv2.CfnWebACL.RateBasedStatementProperty(
                            aggregate_key_type="IP",
                            limit=rate_limit,
                            evaluation_window_sec=EVALUATION_WINDOW_SECONDS,
                        )
                    ),
                    visibility_config=_visibility(f"SignIn{RULE_NAME}"),
                )
            ],
        )
        self.association = wafv2.CfnWebACLAssociation(
            self, "Association", resource_arn=user_pool_arn, web_acl_arn=self.web_acl.attr_arn
        )
