"""The OAuth bridge: what Amazon Cognito lacks for MCP clients, in front of a user pool.

MCP clients discover an authorization server from the endpoint's protected resource metadata, read
its metadata (RFC 8414), register (RFC 7591 dynamic registration, or a Client ID Metadata Document),
then sign in with the authorization code grant, PKCE and the `resource` indicator. The bridge is the
authorization server; Cognito only signs people in (managed login, through one app client of the bridge's).
The bridge:

- `metadata.py`: the authorization server metadata, naming the bridge's endpoints;
- `registration.py`: RFC 7591 registration (a row of the bridge's, nothing in Cognito), with redirect
  URIs checked, and clients that never sign in removed within the hour;
- `limits.py`: token buckets per source address, per signed-in person and per registrable domain
  (eTLD+1, from the bundled Public Suffix List) for registrations, new clients and metadata fetches;
- `cimd.py`: Client ID Metadata Documents, fetched with the MCP spec's rules (HTTPS only, a size
  limit and one deadline over the whole fetch, no private addresses);
- `flows.py`: `/oauth2/authorize` (checks the client, its redirect URI, PKCE and `resource`, asks
  the person on the consent page), `/oauth2/consent` (approve: a browser-bound record, then Cognito;
  deny; the person's approvals page), `/oauth2/callback` (redeems Cognito's code, records the
  approval, gives the client a single-use code of the bridge's), `/oauth2/token` (that code, PKCE,
  redirect URI and resource checked; the bridge's access token and a refresh token of its own, rotated
  at each use, a reused one revoking its family), `/oauth2/revoke`, `/.well-known/jwks.json`;
- `signing.py`: the access tokens, JWTs signed by a KMS key that never leaves KMS;
- `consent.py`: the pages, their CSRF-bound form token, the signed person cookie, the key list;
- `grants.py`: the sign-in records, codes, approvals, refresh tokens (digests) and sealed form keys;
- `aws.py`: the registrations table (conditional writes only) and the user pool's app clients;
- `cleanup.py`: the scheduled cleanup of clients nobody uses, and of what earlier versions left;
- `handler.py`: the Lambda entry point (`oauth_bridge.handler.handle`).
"""
