// logging WS proxy: listens 127.0.0.1:18790, forwards to 127.0.0.1:18789; logs frames as JSONL
import { WebSocketServer, WebSocket } from 'ws';
import fs from 'fs';
const out = fs.createWriteStream(process.argv[2] || '/tmp/oc/logs/frames.jsonl', { flags: 'a' });
let n = 0;
const wss = new WebSocketServer({ host: '127.0.0.1', port: Number(process.env.PORT || 18790), maxPayload: 64 * 1024 * 1024 });
wss.on('connection', (c, req) => {
  const id = ++n;
  const headers = {};
  if (req.headers.origin) headers.origin = req.headers.origin.replace(':18790', ':18789');
  const up = new WebSocket('ws://127.0.0.1:18789' + req.url, { headers, maxPayload: 64 * 1024 * 1024 });
  const q = [];
  const log = (dir, d) => out.write(JSON.stringify({ t: Date.now(), c: id, dir, d: d.toString() }) + '\n');
  up.on('open', () => { for (const m of q) up.send(m); q.length = 0; });
  c.on('message', (m, bin) => { if (process.env.ADMIN_CLI) { try { const j = JSON.parse(m.toString()); if (j.method === 'connect' && Array.isArray(j.params?.scopes) && !j.params.scopes.includes('operator.admin')) { j.params.scopes.push('operator.admin'); m = Buffer.from(JSON.stringify(j)); } } catch {} } log('>', m); if (up.readyState === 1) up.send(m.toString()); else q.push(m.toString()); });
  up.on('message', (m) => { log('<', m); if (c.readyState === 1) c.send(m.toString()); });
  up.on('close', (code, r) => { log('x<', `close ${code} ${r}`); try { c.close(code === 1005 || code === 1006 ? 1000 : code, r); } catch { c.close(); } });
  c.on('close', (code, r) => { log('x>', `close ${code} ${r}`); try { up.close(); } catch {} });
  up.on('error', e => log('err', String(e)));
  c.on('error', e => log('err', String(e)));
});
