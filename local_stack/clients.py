"""boto3 clients for the local stack's own calls, built from one botocore session.

A botocore session caches the service models and endpoint rules it has read; a new session per
client reads them again (about 2 MB of JSON for the endpoints alone), which was most of a stack's
start. Credentials are given per client, so one session serves every role. botocore does not
promise that one session builds clients safely from several threads at once: a lock does.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

_lock = threading.Lock()
_session: Any = None


def aws_client(
    service: str,
    *,
    endpoint: str | None,
    region: str,
    credentials: Mapping[str, str],
    config: Any = None,
) -> Any:
    """A client for `service` signed with these credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
    and AWS_SESSION_TOKEN when there is one), on `endpoint` (None: the service's own)."""
    global _session
    with _lock:
        if _session is None:
            import boto3

            _session = boto3.session.Session()
        return _session.client(
            service,
            endpoint_url=endpoint,
            region_name=region,
            aws_access_key_id=credentials["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=credentials["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=credentials.get("AWS_SESSION_TOKEN"),
            config=config,
        )
