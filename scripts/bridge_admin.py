"""`make revoke-client` and `make rotate-signing-keys`: the OAuth bridge's operator commands (auth=cognito).

Each invokes the bridge's function with an action of its own, as the cleanup schedule does:

- `revoke-client CLIENT=<client_id>`: every person's approval of that client goes, with the refresh tokens
  issued under it (refused by the bridge from now on, and revoked at Cognito); each person is asked again
  on the client's next sign-in. Access tokens already issued run out on their own (`accessTokenMinutes`).
- `rotate-signing-keys`: a new key signs the consent forms and the person cookie from now on; the previous
  two still verify, so nothing in flight breaks (a routine rotation).
- `rotate-signing-keys --retire` (`RETIRE=1` with make): a leaked key, retired in this one step: a new key
  signs and no other verifies, in every container at once. Forms open in a browser and person cookies
  are refused: people open their client's sign-in link again (their approvals stand).

    make revoke-client CLIENT=3f9c...                         # the local stack `make run` started
    make revoke-client CLIENT=https://app.example/client.json STACK=ServerlessMcpTasks
    make rotate-signing-keys STACK=ServerlessMcpTasks          # boto3's default credentials
    make rotate-signing-keys RETIRE=1 STACK=ServerlessMcpTasks # a key leaked: retire every earlier one
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # local_stack, for the local state

BRIDGE_PREFIX: Final = "OAuthBridge"


def local_target(port: int | None) -> tuple[Any, str]:
    """The running local stack's Lambda client (as its administrator) and the bridge's function name."""
    from local_stack.sam_env import admin_client, local_state

    state = local_state(port)
    names = [f["name"] for lid, f in state["functions"].items() if lid.startswith(BRIDGE_PREFIX)]
    if not names:
        raise SystemExit("this stack has no OAuth bridge (auth=cognito only)")
    return admin_client(state, "lambda"), names[0]


def deployed_target(stack_name: str) -> tuple[Any, str]:
    import boto3

    session = boto3.session.Session()
    resources = session.client("cloudformation").describe_stack_resources(StackName=stack_name)["StackResources"]
    names = [
        r["PhysicalResourceId"]
        for r in resources
        if r["ResourceType"] == "AWS::Lambda::Function" and r["LogicalResourceId"].startswith(BRIDGE_PREFIX)
    ]
    if not names:
        raise SystemExit(f"{stack_name} has no OAuth bridge (auth=cognito only)")
    return session.client("lambda"), names[0]


def invoke(lambda_: Any, function: str, action: dict[str, str]) -> dict[str, Any]:
    answer = lambda_.invoke(FunctionName=function, Payload=json.dumps(action).encode())
    result: dict[str, Any] = json.loads(answer["Payload"].read())
    if answer.get("FunctionError"):
        raise SystemExit(f"the bridge failed: {result}")
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["revoke-client", "rotate-signing-keys"])
    parser.add_argument("--client", help="the client_id to revoke (revoke-client)")
    parser.add_argument(
        "--retire",
        action="store_true",
        default=(os.environ.get("RETIRE") or "") not in ("", "0"),  # `make rotate-signing-keys RETIRE=1`
        help="rotate-signing-keys: no earlier key verifies any more (a leaked key)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--stack", help="a deployed stack's name")
    where.add_argument("--port", type=int, help="the local stack's port (default: the newest)")
    args = parser.parse_args(argv)
    lambda_, function = deployed_target(args.stack) if args.stack else local_target(args.port)
    if args.command == "revoke-client":
        if not args.client:
            parser.error("revoke-client needs --client (CLIENT=... with make)")
        result = invoke(lambda_, function, {"action": "revoke-client", "clientId": args.client})
        if "error" in result:
            print(f"not revoked: {result['error']}", file=sys.stderr)
            return 1
        print(f"revoked {result['revokedApprovals']} approvals of {args.client} and their refresh tokens")
    else:
        result = invoke(lambda_, function, {"action": "rotate-signing-keys", "retire": args.retire})
        if args.retire:
            print("a new signing key signs from now on; every earlier key is retired (no container accepts it)")
        else:
            print(f"a new signing key signs from now on; {result['signingKeys']} keys verify")
    return 0


if __name__ == "__main__":
    sys.exit(main())
