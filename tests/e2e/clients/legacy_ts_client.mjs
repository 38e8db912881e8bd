// A 2025-11-25 client on the TypeScript SDK 1.x (@modelcontextprotocol/sdk, pinned in package.json).
// Usage: node legacy_ts_client.mjs URL SCRIPT_JSON
// SCRIPT: {"calls": [{"tool", "arguments", "progress"?: true}], "answers": [content | "decline"], "list"?: true}
// "$HANDLE" in an argument is replaced by the first handle (cart_...) an earlier call returned.
// Prints one JSON report: the tools listed, each call's texts and isError, what the user was
// asked, the progress messages received, and the negotiated protocol version.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [url, scriptText] = process.argv.slice(2);
const script = JSON.parse(scriptText);
const answers = [...(script.answers ?? [])];
const report = { tools: [], calls: [], asked: [], progress: [], protocolVersion: null };

const client = new Client({ name: 'legacy-ts-client', version: '1.0.0' }, { capabilities: { elicitation: {} } });
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  report.asked.push(request.params.message);
  const answer = answers.shift();
  if (typeof answer === 'string') return { action: answer };
  return { action: 'accept', content: answer };
});
const transport = new StreamableHTTPClientTransport(new URL(url));
await client.connect(transport);
report.protocolVersion = transport.protocolVersion ?? null;

if (script.list) {
  const listed = await client.listTools();
  report.tools = listed.tools.map((tool) => tool.name);
}
let handle = null;
for (const call of script.calls ?? []) {
  const args = JSON.parse(JSON.stringify(call.arguments ?? {}).replaceAll('$HANDLE', handle ?? ''));
  const options = call.progress ? { onprogress: (p) => report.progress.push(p.message ?? String(p.progress)) } : {};
  const result = await client.callTool({ name: call.tool, arguments: args }, undefined, options);
  const texts = result.content.filter((block) => block.type === 'text').map((block) => block.text);
  report.calls.push({ texts, isError: result.isError === true });
  const found = texts.join(' ').match(/cart_[A-Za-z0-9_-]+/);
  if (found && handle === null) handle = found[0];
}
await transport.terminateSession();
await client.close();
console.log(JSON.stringify(report));
