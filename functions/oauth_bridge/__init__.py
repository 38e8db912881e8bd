"""The OAuth bridge: what Amazon Cognito lacks for MCP clients, in front of a user pool.

MCP clients discover an authorization server from the endpoint's protected resource metadata, read
its metadata (RFC 8414), register (RFC 7591 dynamic registration, or a Client ID Metadata Document),
then sign in with the authorization code grant, PKCE and the `resource` indicator. Cognito signs
people in (managed login) and issues the tokens; it has neither registration method. The bridge:

- `metadata.py`: the authorization server metadata, naming the bridge's endpoints;
- `registration.py`: RFC 7591 client metadata and the redirect URIs an MCP client may use;
- `limits.py`: token buckets per source address and per registrable domain (eTLD+1, from the
  bundled Public Suffix List) for registrations and metadata fetches;
- `cimd.py`: Client ID Metadata Documents, fetched with the MCP spec's rules (HTTPS only, a size
  limit and one deadline over the whole fetch, no private addresses);
- `flows.py`: `/oauth2/authorize` (checks the client, its redirect URI, PKCE and `resource`, asks
  the person on the consent page, then redirects to Cognito's managed login), `/oauth2/consent`
  (the page's approve, deny and forget) and `/oauth2/token` (maps the client id, then forwards to
  Cognito's token endpoint);
- `consent.py`: the consent page, its CSRF-bound form token and the signed approvals cookie;
- `aws.py`: the registrations table (conditional writes only) and the user pool's app clients;
- `cleanup.py`: the scheduled cleanup of clients nobody uses (Cognito client first, then the
  registration, then the slot; the slots recounted every run);
- `handler.py`: the Lambda entry point (`oauth_bridge.handler.handle`).
"""
