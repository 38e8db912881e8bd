// The TypeScript SDK 1.x (@modelcontextprotocol/sdk) signing in through the OAuth bridge, its own OAuth code
// from the 401 on: discovery, dynamic registration, PKCE, `resource`. The person (scripted here with fetch and
// a cookie jar, as a browser) approves on the consent page and follows Cognito's stand-in and the bridge's
// callback back to the client's redirect URI; the SDK exchanges the code, calls a tool, then refreshes.
// Usage: NODE_EXTRA_CA_CERTS=<stand-in CA> node bridge_ts_client.mjs URL
// Prints one JSON report: the pages the person saw, the client id, the tool's result, the refresh.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError, refreshAuthorization } from '@modelcontextprotocol/sdk/client/auth.js';

const [url] = process.argv.slice(2);
const redirectUrl = 'http://127.0.0.1:53683/callback';
const saved = { clientInformation: undefined, tokens: undefined, verifier: undefined, authorizationUrl: undefined };
const provider = {
  get redirectUrl() {
    return redirectUrl;
  },
  get clientMetadata() {
    return {
      client_name: 'TypeScript SDK through the bridge',
      redirect_uris: [redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  },
  clientInformation: () => saved.clientInformation,
  saveClientInformation: (information) => { saved.clientInformation = information; },
  tokens: () => saved.tokens,
  saveTokens: (tokens) => { saved.tokens = tokens; },
  redirectToAuthorization: (authorizationUrl) => { saved.authorizationUrl = authorizationUrl; },
  saveCodeVerifier: (verifier) => { saved.verifier = verifier; },
  codeVerifier: () => saved.verifier,
};

const unescape = (text) =>
  text.replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&quot;', '"').replaceAll('&#x27;', "'").replaceAll('&amp;', '&');

async function approveAsThePerson(authorizationUrl) {
  const jar = new Map();
  const send = async (target, init = {}) => {
    const cookie = [...jar].map(([name, value]) => `${name}=${value}`).join('; ');
    const response = await fetch(target, { ...init, headers: { ...(init.headers ?? {}), cookie }, redirect: 'manual' });
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const at = pair.indexOf('=');
      jar.set(pair.slice(0, at), pair.slice(at + 1));
    }
    return response;
  };
  const page = await (await send(authorizationUrl.href)).text();
  const field = (name) => unescape(page.match(new RegExp(`name="${name}" value="([^"]*)"`))[1]);
  const pages = [page.match(/<title>([^<]*)<\/title>/)[1]];
  let response = await send(new URL('/oauth2/consent', authorizationUrl).href, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ request: field('request'), token: field('token'), decision: 'approve' }).toString(),
  });
  for (let hop = 0; hop < 5; hop += 1) {
    const location = response.headers.get('location');
    if (location === null) throw new Error(`no redirect: ${response.status} ${await response.text()}`);
    if (location.startsWith(redirectUrl)) return { code: new URL(location).searchParams.get('code'), pages };
    response = await send(location);
  }
  throw new Error('never sent back to the client');
}

const connect = async () => {
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  const client = new Client({ name: 'bridge-ts-client', version: '1.0.0' });
  await client.connect(transport);
  return client;
};

const first = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
try {
  await new Client({ name: 'bridge-ts-client', version: '1.0.0' }).connect(first);
  throw new Error('connected without signing in');
} catch (error) {
  if (!(error instanceof UnauthorizedError)) throw error;
}
const { code, pages } = await approveAsThePerson(saved.authorizationUrl);
await first.finishAuth(code);
const client = await connect();
const result = await client.callTool({ name: 'count_words', arguments: { text: 'one two three' } });
await client.close();
const metadata = await (await fetch(new URL('/.well-known/oauth-authorization-server', url))).json();
const refreshed = await refreshAuthorization(new URL(metadata.issuer), {
  metadata,
  clientInformation: saved.clientInformation,
  refreshToken: saved.tokens.refresh_token,
  resource: new URL(url),
});
console.log(JSON.stringify({
  pages,
  clientId: saved.clientInformation.client_id,
  result: result.structuredContent,
  accessToken: saved.tokens.access_token,
  refreshed: Boolean(refreshed.access_token),
}));
