"""`SamResourceId` on every resource of the template, for `sam local invoke -t cdk.out/<stack>.template.json`.

SAM names each resource of a CDK template by its `SamResourceId` metadata first, then by the
construct in its `aws:cdk:path`; a path it cannot read costs a `Cannot detect function id` warning
per resource. With `SamResourceId` set to the logical id, SAM finds each function by the name the
template and the docs use (`FunctionsApiFunction34137F74`), and reads no path at all. The code itself
SAM finds through `aws:asset:path`, which the CDK CLI writes beside the template.
"""

from __future__ import annotations

import jsii
from aws_cdk import CfnResource, IAspect
from constructs import IConstruct

SAM_RESOURCE_ID = "SamResourceId"


@jsii.implements(IAspect)
class SamResourceIds:
    def visit(self, node: IConstruct) -> None:
        if isinstance(node, CfnResource):
            node.add_metadata(SAM_RESOURCE_ID, node.logical_id)
