// The local authorization server of `AUTH=oauth make run`: oidc-provider (a certified OpenID
// provider, pinned in package.json), configured like the deployed issuer the template trusts:
// - resource indicators (RFC 8707): access tokens are JWTs (RS256) whose `aud` is the MCP endpoint's
//   canonical URI, and only the resources in LOCAL_OAUTH_RESOURCES are accepted (else invalid_target);
// - the scope the endpoint requires (LOCAL_OAUTH_SCOPE, "mcp/invoke" like the Cognito resource server);
// - authorization code with PKCE (S256) required, dynamic client registration (RFC 7591),
//   Client ID Metadata Documents advertised, refresh tokens for clients that register the grant;
// - the client credentials grant (machine clients, registered with grant_types ["client_credentials"]);
// - development users (LOCAL_OAUTH_USERS="alice:password,bob:password") who sign in on a plain HTML
//   form at /interaction/<uid>, then consent.
// Prints one JSON line {"issuer": ...} once it listens. Never deploy this: it keeps state in memory.
import crypto from 'node:crypto';
import http from 'node:http';
import Provider, { errors } from 'oidc-provider';

const port = Number(process.env.LOCAL_OAUTH_PORT || 0);
const host = '127.0.0.1';
const scope = process.env.LOCAL_OAUTH_SCOPE || 'mcp/invoke';
const resources = (process.env.LOCAL_OAUTH_RESOURCES || '').split(',').filter(Boolean);
const accessTokenSeconds = Number(process.env.LOCAL_OAUTH_ACCESS_TOKEN_SECONDS || 3600);
const users = Object.fromEntries(
  (process.env.LOCAL_OAUTH_USERS || 'alice:alice-password,bob:bob-password')
    .split(',')
    .filter(Boolean)
    .map((pair) => [pair.slice(0, pair.indexOf(':')), pair.slice(pair.indexOf(':') + 1)]),
);

const { privateKey } = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: crypto.randomUUID(), alg: 'RS256', use: 'sig' };

const server = http.createServer();
await new Promise((resolve) => server.listen(port, host, resolve));
const issuer = `http://${host}:${server.address().port}`;

// Redirect URIs as the Cognito bridge accepts them (oauth_bridge/registration.py): https, http on a
// loopback host only, or a native app's private-use scheme named as a reverse domain name (or Cursor's);
// never http to another host, never user-info or a backslash.
const KNOWN_APP_SCHEMES = new Set(['cursor:']);
const PRIVATE_SCHEME = /^[a-z][a-z0-9-]*(\.[a-z0-9-]+)+:$/;
const LOOPBACK = new Set(['127.0.0.1', '[::1]', 'localhost']);
const FORBIDDEN = new Set(['javascript:', 'data:', 'file:', 'vbscript:', 'about:', 'blob:', 'ws:', 'wss:']);
function refuseRedirectUri(description) {
  const error = new errors.InvalidRedirectUri();
  error.error_description = description; // its own description is about authorize requests
  return error;
}
function checkRedirectUris(uris) {
  for (const uri of uris || []) {
    if (uri.includes('\\')) {
      throw refuseRedirectUri(`the redirect URI '${uri}' has a backslash, which browsers read as a slash`);
    }
    const parsed = URL.parse(uri);
    if (parsed && parsed.protocol === 'http:' && !LOOPBACK.has(parsed.hostname)) {
      throw refuseRedirectUri(`the redirect URI '${uri}' uses http on a host other than loopback`);
    }
    if (parsed && FORBIDDEN.has(parsed.protocol)) {
      throw refuseRedirectUri(`the redirect URI scheme '${parsed.protocol.slice(0, -1)}' is not allowed`);
    }
    if (parsed && (parsed.username || parsed.password)) {
      throw refuseRedirectUri(`the redirect URI '${uri}' has user information (before an @ in its host)`);
    }
    const web = parsed && (parsed.protocol === 'http:' || parsed.protocol === 'https:');
    if (parsed && !web && !KNOWN_APP_SCHEMES.has(parsed.protocol) && !PRIVATE_SCHEME.test(parsed.protocol)) {
      throw refuseRedirectUri(
        `the redirect URI '${uri}' has a private-use scheme that is not a reverse domain name ` +
          '(RFC 8252 §7.1: com.example.app:/callback)',
      );
    }
  }
}

const provider = new Provider(issuer, {
  jwks: { keys: [signingKey] },
  cookies: { keys: [crypto.randomBytes(32).toString('hex')] },
  scopes: ['openid', 'offline_access', scope],
  claims: { openid: ['sub'], profile: ['name'] },
  clientDefaults: { grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'] },
  // The validator of an extra property sees the whole metadata: the redirect URI policy runs there.
  extraClientMetadata: {
    properties: ['mcp_redirect_uri_policy'],
    validator: (ctx, key, value, metadata) => checkRedirectUris(metadata.redirect_uris),
  },
  pkce: { required: () => true },
  issueRefreshToken: async (ctx, client) => client.grantTypeAllowed('refresh_token'),
  ttl: { AccessToken: accessTokenSeconds, AuthorizationCode: 120, Interaction: 600, Grant: 86400, Session: 86400 },
  findAccount: async (ctx, id) =>
    users[id] === undefined ? undefined : { accountId: id, claims: async () => ({ sub: id, name: id }) },
  interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
  features: {
    devInteractions: { enabled: false },
    clientCredentials: { enabled: true },
    registration: { enabled: true },
    revocation: { enabled: true },
    clientIdMetadataDocument: {
      enabled: true,
      ack: 'draft-02',
      // Documents are fetched only over https from public hosts; none is reachable from here.
      allowFetch: async () => false,
    },
    resourceIndicators: {
      enabled: true,
      defaultResource: async (ctx, client, oneOf) => oneOf ?? resources[0],
      useGrantedResource: async () => true,
      getResourceServerInfo: async (ctx, resource) => {
        if (!resources.includes(resource)) throw new errors.InvalidTarget(`tokens are issued for ${resources.join(', ')} only`);
        return {
          scope,
          audience: resource,
          accessTokenTTL: accessTokenSeconds,
          accessTokenFormat: 'jwt',
          jwt: { sign: { alg: 'RS256' } },
        };
      },
    },
  },
});

const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
const page = (title, body) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>${escape(title)}</title></head><body>${body}</body></html>`;
const readForm = (req) =>
  new Promise((resolve, reject) => {
    let data = '';
    req.on('data', (chunk) => {
      data += chunk;
      if (data.length > 8192) reject(new Error('form too large'));
    });
    req.on('end', () => resolve(Object.fromEntries(new URLSearchParams(data))));
  });

async function interaction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { uid, prompt, params } = details;
  const path = new URL(req.url, issuer).pathname;
  if (req.method === 'GET') {
    res.setHeader('content-type', 'text/html; charset=utf-8');
    if (prompt.name === 'login') {
      res.end(
        page(
          'Sign in',
          `<h1>Sign in to the local MCP server</h1><p>Client: ${escape(params.client_id)}</p>` +
            `<form method="post" action="/interaction/${uid}/login">` +
            `<input name="username" autocomplete="username"><input name="password" type="password">` +
            `<button type="submit">Sign in</button></form>`,
        ),
      );
      return;
    }
    res.end(
      page(
        'Consent',
        `<h1>Allow access?</h1><p>Client: ${escape(params.client_id)} asks for ${escape(params.scope || scope)}</p>` +
          `<form method="post" action="/interaction/${uid}/confirm"><button type="submit">Allow</button></form>`,
      ),
    );
    return;
  }
  const form = await readForm(req);
  if (path.endsWith('/login')) {
    if (!(form.username in users) || users[form.username] !== form.password) {
      res.statusCode = 401;
      res.setHeader('content-type', 'text/html; charset=utf-8');
      res.end(page('Sign in', '<h1>Wrong user name or password</h1>'));
      return;
    }
    await provider.interactionFinished(req, res, { login: { accountId: form.username } }, { mergeWithLastSubmission: false });
    return;
  }
  const { grantId, session } = details;
  const grant = grantId
    ? await provider.Grant.find(grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const missing = prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes || {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  await provider.interactionFinished(req, res, { consent: { grantId: await grant.save() } }, { mergeWithLastSubmission: true });
}

const callback = provider.callback();
server.on('request', (req, res) => {
  if (req.url.startsWith('/interaction/')) {
    interaction(req, res).catch((error) => {
      res.statusCode = 400;
      res.setHeader('content-type', 'text/html; charset=utf-8');
      res.end(page('Error', `<h1>${escape(error.name || 'error')}</h1><p>${escape(error.message)}</p>`));
    });
    return;
  }
  const url = new URL(req.url, issuer);
  if (url.pathname === '/auth' && !url.searchParams.has('scope')) {
    // Without a scope, the endpoint's scope is asked for: Cognito grants an app client its scopes.
    url.searchParams.set('scope', scope);
    req.url = url.pathname + url.search;
  }
  callback(req, res);
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
console.log(JSON.stringify({ issuer, users: Object.keys(users), resources, scope }));
