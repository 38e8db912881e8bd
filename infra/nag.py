"""cdk-nag acknowledgements: each names one rule finding on one construct and says why it stands.

Every acknowledgement is also recorded in `ACKNOWLEDGED`, so a test can synthesize with the
context key `nagAcknowledge=false` (findings reported, nothing acknowledged) and prove that each
acknowledgement answers a real finding and each finding has an acknowledgement.
"""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import Acknowledgment, Validations
from constructs import IConstruct


@dataclass(frozen=True, slots=True)
class Acknowledged:
    path: str
    rule_id: str
    reason: str


ACKNOWLEDGED: list[Acknowledged] = []


def acknowledge(construct: IConstruct, rule_id: str, reason: str) -> None:
    if len(reason.strip()) < 40:
        raise ValueError(f"acknowledgement of {rule_id} needs a real reason")
    ACKNOWLEDGED.append(Acknowledged(construct.node.path, rule_id, reason))
    if str(construct.node.try_get_context("nagAcknowledge")).lower() == "false":
        return
    Validations.of(construct).acknowledge(Acknowledgment(id=rule_id, reason=reason))
