"""`make secret NAME=... VALUE=...`: create a Secrets Manager secret on the running local stack, or set a new
value of one, so a tool's `ctx.secret` finds what cdk.json's `toolSecrets` names under `make run` as it
would in AWS (docs/configuration.md, "Configure your tools").

    make secret NAME=acme/weather-api-key VALUE=abc123     # the local stack `make run` started (PORT=... if not 3000)
    make secret NAME=acme/weather-api-key < key.txt        # the value from standard input, kept out of shell history

NAME is the secret's name as `toolSecrets` gives it (the right-hand side). In AWS, create the secret once
with the AWS CLI: `aws secretsmanager create-secret --name acme/weather-api-key --secret-string file://key.txt`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # local_stack, for the local state

REGION = "us-east-1"  # the local stack's region


def local_client(port: int | None) -> Any:
    """Secrets Manager on the running local stack's moto, as its administrator (IAM is enforced there)."""
    from local_stack.clients import aws_client
    from local_stack.sam_env import local_state

    state = local_state(port)
    return aws_client(
        "secretsmanager", endpoint=state["awsEndpoint"], region=REGION, credentials=state["administrator"]
    )


def put_secret(client: Any, name: str, value: str) -> str:
    """Create the secret, or give an existing one this value (a new version); what was done, and its ARN."""
    try:
        arn = client.create_secret(Name=name, SecretString=value)["ARN"]
        return f"created secret {name} ({arn})"
    except client.exceptions.ResourceExistsException:
        arn = client.put_secret_value(SecretId=name, SecretString=value)["ARN"]
        return f"set a new value of secret {name} ({arn})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make secret", description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="the secret's name, as cdk.json's toolSecrets gives it")
    parser.add_argument("--value", help="its value (default: read from standard input)")
    parser.add_argument("--port", type=int, help="the local stack's port (default: the newest one)")
    args = parser.parse_args(argv)
    value = args.value if args.value is not None else sys.stdin.read()
    if not value:
        parser.error("the secret's value is empty: give VALUE=... or pipe it on standard input")
    print(put_secret(local_client(args.port), args.name, value))
    return 0


if __name__ == "__main__":
    sys.exit(main())
