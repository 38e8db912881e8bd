// The TypeScript SDK 1.x (@modelcontextprotocol/sdk) signing in through the OAuth bridge, its own OAuth code
// from the 401 on: discovery, dynamic registration, PKCE, `resource`. The person (scripted here with fetch and
// a cookie jar, as a browser) approves on the consent page and follows Cognito's stand-in and the bridge's
// callback back to the client's redirect URI; the SDK exchanges the code and calls a tool.
//
// Then the SDK refreshes as it does: on a 401 for an access token that ran out, `auth()` spends the refresh
// token it holds and retries the call. The test (on the other end of stdin and stdout) hands over the token
// the client holds as it reads once its time ran out; twice, so the second refresh spends the token the first
// one rotated in. Then the test replays the first refresh token (a thief's copy); the SDK's next refresh is
// refused, it drops its tokens (invalidateCredentials) and sends the person to sign in again.
//
// Usage: NODE_EXTRA_CA_CERTS=<stand-in CA> node bridge_ts_client.mjs URL
// Protocol: one JSON line out per step ({"step": "expire", "accessToken", "refreshToken"} or
// {"step": "reuse", "accessToken", "refreshToken"}), answered by one JSON line in ({"accessToken": <expired copy>});
// last, {"step": "report", ...}.
import { createInterface } from 'node:readline';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { UnauthorizedError } from '@modelcontextprotocol/sdk/client/auth.js';

const [url] = process.argv.slice(2);
const redirectUrl = 'http://127.0.0.1:53683/callback';
const saved = { clientInformation: undefined, tokens: undefined, verifier: undefined, authorizationUrl: undefined };
const tokenHistory = [];
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
  saveTokens: (tokens) => { saved.tokens = tokens; tokenHistory.push(tokens); },
  redirectToAuthorization: (authorizationUrl) => { saved.authorizationUrl = authorizationUrl; },
  saveCodeVerifier: (verifier) => { saved.verifier = verifier; },
  codeVerifier: () => saved.verifier,
  invalidateCredentials: (scope) => {
    if (scope === 'all' || scope === 'client') saved.clientInformation = undefined;
    if (scope === 'all' || scope === 'tokens') saved.tokens = undefined;
    if (scope === 'all' || scope === 'verifier') saved.verifier = undefined;
  },
};

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
async function ask(step) {
  console.log(JSON.stringify(step));
  const { value, done } = await lines.next();
  if (done) throw new Error(`no answer to ${step.step}`);
  return JSON.parse(value);
}

const unescape = (text) =>
  text.replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&quot;', '"').replaceAll('&#x27;', "'").replaceAll('&amp;', '&');
const pages = [];

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
  pages.push(page.match(/<title>([^<]*)<\/title>/)[1]);
  let response = await send(new URL('/oauth2/consent', authorizationUrl).href, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ request: field('request'), token: field('token'), decision: 'approve' }).toString(),
  });
  for (let hop = 0; hop < 5; hop += 1) {
    const location = response.headers.get('location');
    if (location === null) throw new Error(`no redirect: ${response.status} ${await response.text()}`);
    if (location.startsWith(redirectUrl)) return new URL(location).searchParams.get('code');
    response = await send(location);
  }
  throw new Error('never sent back to the client');
}

// Connects, signing the person in first when the SDK asks for it (a 401 it could not answer with a refresh).
async function connect() {
  for (let attempt = 0; attempt < 2; attempt += 1) {
    const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
    const client = new Client({ name: 'bridge-ts-client', version: '1.0.0' });
    try {
      await client.connect(transport);
      return client;
    } catch (error) {
      if (!(error instanceof UnauthorizedError)) throw error;
      await transport.finishAuth(await approveAsThePerson(saved.authorizationUrl));
    }
  }
  throw new Error('still not signed in');
}

const countWords = async (client, text) =>
  (await client.callTool({ name: 'count_words', arguments: { text } })).structuredContent;

let client = await connect();
const results = [await countWords(client, 'one two three')];
// Two refreshes on the SDK's own 401 path: the second spends the refresh token the first rotated in.
for (const text of ['after one refresh', 'after the second refresh']) {
  const { accessToken } = await ask({
    step: 'expire', accessToken: saved.tokens.access_token, refreshToken: saved.tokens.refresh_token,
  });
  saved.tokens = { ...saved.tokens, access_token: accessToken };
  results.push(await countWords(client, text));
}
await client.close();
// A thief replays the first refresh token: the family goes, and the SDK's next refresh with it.
const { accessToken } = await ask({
  step: 'reuse', accessToken: saved.tokens.access_token, refreshToken: tokenHistory[0].refresh_token,
});
saved.tokens = { ...saved.tokens, access_token: accessToken };
try {
  client = await connect(); // initialize gets the 401; the refresh is refused; the person is asked again
  results.push(await countWords(client, 'signed in again'));
} finally {
  await client.close();
}
console.log(JSON.stringify({
  step: 'report',
  pages,
  clientId: saved.clientInformation.client_id,
  results,
  tokens: tokenHistory.map((tokens) => ({ accessToken: tokens.access_token, refreshToken: tokens.refresh_token })),
}));
process.exit(0);
