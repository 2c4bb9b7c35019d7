// static Control UI server + logging WS forwarder on one port (127.0.0.1:18800) -> loopgate 127.0.0.1:18789
import http from 'http'; import fs from 'fs'; import path from 'path';
import { WebSocketServer, WebSocket } from 'ws';
const ROOT = '/tmp/oc/node_modules/openclaw/dist/control-ui';
const out = fs.createWriteStream(process.argv[2] || '/tmp/oc/logs4/frames_ui.jsonl', { flags: 'a' });
const httplog = fs.createWriteStream('/tmp/oc/logs4/uiproxy_http.log', { flags: 'a' });
const MIME = { '.html':'text/html; charset=utf-8', '.js':'text/javascript', '.mjs':'text/javascript', '.css':'text/css', '.json':'application/json', '.svg':'image/svg+xml', '.png':'image/png', '.ico':'image/x-icon', '.webp':'image/webp', '.woff2':'font/woff2', '.webmanifest':'application/manifest+json', '.wasm':'application/wasm', '.txt':'text/plain' };
const srv = http.createServer((req, res) => {
  const u = new URL(req.url, 'http://x');
  let p = path.normalize(decodeURIComponent(u.pathname)).replace(/^(\.\.[\/\\])+/, '');
  let f = path.join(ROOT, p);
  const ok = (x) => x.startsWith(ROOT) && fs.existsSync(x) && !fs.statSync(x).isDirectory();
  if (!ok(f)) { const segs = p.split('/').filter(Boolean); f = null; for (let i = 1; i < segs.length; i++) { const c = path.join(ROOT, ...segs.slice(i)); if (ok(c)) { f = c; break; } } if (!f) f = path.join(ROOT, 'index.html'); }
  httplog.write(`${Date.now()} ${req.method} ${req.url} -> ${path.relative(ROOT, f)}\n`);
  res.writeHead(200, { 'content-type': MIME[path.extname(f)] || 'application/octet-stream', 'cache-control': 'no-store' });
  fs.createReadStream(f).pipe(res);
});
let n = 0;
const wss = new WebSocketServer({ server: srv, maxPayload: 64 * 1024 * 1024 });
wss.on('connection', (c, req) => {
  const id = ++n;
  const headers = { origin: 'http://127.0.0.1:18789' };
  httplog.write(`${Date.now()} WS ${req.url} origin=${req.headers.origin}\n`);
  const up = new WebSocket('ws://127.0.0.1:18789' + req.url, { headers, maxPayload: 64 * 1024 * 1024 });
  const q = [];
  const log = (dir, d) => out.write(JSON.stringify({ t: Date.now(), c: id, dir, d: d.toString() }) + '\n');
  up.on('open', () => { for (const m of q) up.send(m); q.length = 0; });
  c.on('message', (m) => { log('>', m); if (up.readyState === 1) up.send(m.toString()); else q.push(m.toString()); });
  up.on('message', (m) => { log('<', m); if (c.readyState === 1) c.send(m.toString()); });
  up.on('unexpected-response', (r, resp) => log('err', `upgrade refused ${resp.statusCode}`));
  up.on('close', (code, r) => { log('x<', `close ${code} ${r}`); try { c.close(code === 1005 || code === 1006 ? 1000 : code, r); } catch { c.close(); } });
  c.on('close', (code, r) => { log('x>', `close ${code} ${r}`); try { up.close(); } catch {} });
  up.on('error', e => log('err', String(e)));
  c.on('error', e => log('err', String(e)));
});
srv.listen(18800, '127.0.0.1');
