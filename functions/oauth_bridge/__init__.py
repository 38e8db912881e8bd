"""The OAuth bridge: what Amazon Cognito lacks for MCP clients, in front of a user pool.

MCP clients discover an authorization server from the endpoint's protected resource metadata, read
its metadata (RFC 8414), register (RFC 7591 dynamic registration, or a Client ID Metadata Document),
then sign in with the authorization code grant, PKCE and the `resource` indicator. Cognito signs
people in (managed login) and issues the tokens; it has neither registration method. The bridge:

- `metadata.py`: the authorization server metadata, naming the bridge's endpoints;
- `registration.py`: RFC 7591 registration backed by Cognito app clients (`cognito.py`), with
  redirect URIs checked, rate limits per source address and per metadata host, a cap on registered
  clients, and clients that never sign in removed within the hour;
- `cimd.py`: Client ID Metadata Documents, fetched with the MCP spec's rules (HTTPS only, size and
  time limits, no private addresses);
- `flows.py`: `/oauth2/authorize` (checks the client, its redirect URI, PKCE and `resource`, asks
  the person on the consent page, then redirects to Cognito's managed login), `/oauth2/consent`
  (the page's approve, deny and forget) and `/oauth2/token` (maps the client id, then forwards to
  Cognito's token endpoint);
- `consent.py`: the consent page, its CSRF-bound form token and the signed approvals cookie;
- `store.py`: the registrations table (conditional writes only); `cleanup` deletes clients unused
  for a configured number of days;
- `handler.py`: the Lambda entry point (`oauth_bridge.handler.handle`).
"""
