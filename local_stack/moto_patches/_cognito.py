"""Cognito user pools."""

from __future__ import annotations

import json
import threading
from typing import Any

from local_stack.moto_patches._registry import Patch, Patcher, register


def _signing_key_imported_once(patcher: Patcher) -> None:
    import moto.cognitoidp.models as models

    original = patcher.original(models, "jwk")
    patcher.require(original, "RSAKey")
    imported: dict[str, Any] = {}
    lock = threading.Lock()

    class RSAKey:
        """joserfc's RSAKey where moto's pools reach it: `import_key` of one JWK (text or dict) imports it once."""

        @staticmethod
        def import_key(value: Any, *args: Any, **kwargs: Any) -> Any:
            if args or kwargs or not isinstance(value, (str, dict)):
                return original.RSAKey.import_key(value, *args, **kwargs)
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
            with lock:
                if text not in imported:
                    imported[text] = original.RSAKey.import_key(value)
                return imported[text]

    class Jwk:
        def __getattr__(self, name: str) -> Any:
            return RSAKey if name == "RSAKey" else getattr(original, name)

    patcher.replace(models, "jwk", Jwk())


register(
    Patch(
        name="user_pools_import_their_signing_key_once",
        group="emulation",
        aws="CreateUserPool returns the new pool at once: the pool's signing keys are the service's, "
        "published at the pool's /.well-known/jwks.json.",
        moto="Every pool re-reads the one private JWK moto signs all pools' tokens with and imports it "
        "again, recovering its RSA primes in pure Python: about 0.2 s of CPU per pool.",
        reference="https://docs.aws.amazon.com/cognito/latest/developerguide/amazon-cognito-user-pools-using-tokens-verifying-a-jwt.html",
        install=_signing_key_imported_once,
    )
)
