// tiny openclaw-node 0.14.0 client against loopgate (via the logging proxy)
import { OpenClawClient } from 'openclaw-node';
const url = process.env.URL || 'ws://127.0.0.1:18790';
const token = process.env.OPENCLAW_GATEWAY_TOKEN;
const client = new OpenClawClient({ url, token, deviceIdentityPath: '/tmp/oc/home2/ocnode-device.json', autoReconnect: false,
  ...(process.env.SCOPES ? { scopes: process.env.SCOPES.split(',') } : {}) });
const res = {};
async function step(name, fn) {
  const t = Date.now();
  try { const v = await fn(); res[name] = 'ok'; console.log(`[ok] ${name} (${Date.now()-t}ms):`, JSON.stringify(v)?.slice(0, 400)); return v; }
  catch (e) { res[name] = 'FAIL'; console.log(`[FAIL] ${name} (${Date.now()-t}ms):`, e?.message || e, e?.code ? `code=${e.code}` : '', e?.details ? JSON.stringify(e.details) : ''); }
}
const hello = await step('connect', () => client.connect());
console.log('hello auth:', JSON.stringify(hello?.auth));
await step('health', () => client.health());
await step('agents.list', () => client.agents.list());
await step('chat (stream)', async () => {
  const chunks = [];
  for await (const c of client.chat('hello from openclaw-node', { sessionKey: 'agent:main:ocnode' })) chunks.push(c);
  return chunks;
});
await step('chatSync', () => client.chatSync('sync please', { sessionKey: 'agent:main:ocnode' }));
await step('sessions.list', () => client.sessions.list({ limit: 5 }));
await step('sessions.history', () => client.sessions.history('agent:main:ocnode', { limit: 10 }));
await step('sessions.describe', () => client.sessions.describe('agent:main:ocnode'));
await step('describe unknown key', () => client.sessions.describe('agent:main:nope'));
await step('request sessions.preview', () => client.request('sessions.preview', { keys: ['agent:main:ocnode', 'agent:main:nope'], limit: 3 }));
await step('request system-presence', () => client.request('system-presence', {}));
await step('pairing.list', () => client.pairing.list('telegram'));
await step('sessions.send', () => client.sessions.send('agent:main:ocnode', 'via sessions.send'));
await step('chatAbort', () => client.chatAbort('agent:main:ocnode'));
await step('config.get', () => client.config.get());
await step('channels.status', () => client.channels.status());
let runId;
await step('request agent', async () => { const r = await client.request('agent', { message: 'raw agent', sessionKey: 'agent:main:ocnode', idempotencyKey: 'ocnode-' + Date.now() }); runId = r?.payload?.runId ?? r?.runId; return r; });
await step('agentWait', () => client.agentWait(runId || 'none', { timeoutMs: 5000 }));
await step('subscribeMessages', () => client.sessions.subscribeMessages('agent:main:ocnode', () => {}));
await step('sessions.compact', () => client.sessions.compact('agent:main:ocnode'));
await step('sessions.reset', () => client.sessions.reset('agent:main:ocnode'));
await step('sessions.delete', () => client.sessions.delete('agent:main:ocnode'));
console.log('SUMMARY', JSON.stringify(res));
await client.disconnect();
process.exit(0);
