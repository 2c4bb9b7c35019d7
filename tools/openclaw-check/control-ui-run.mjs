import { chromium } from 'playwright-core';
import fs from 'fs';
const token = fs.readFileSync('/tmp/oc/state4/gateway.token', 'utf8').trim();
const OUT = '/tmp/oc/out4/ui';
const udd = '/tmp/oc/chrome-profile4-' + Date.now();
const ctx = await chromium.launchPersistentContext(udd, { executablePath: '/usr/bin/chromium', headless: true, viewport: { width: 1400, height: 1000 },
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
const page = ctx.pages()[0] || await ctx.newPage();
const clog = fs.createWriteStream(`${OUT}/console.log`);
const T0 = Date.now();
const ts = () => ((Date.now() - T0) / 1000).toFixed(1);
page.on('console', m => clog.write(`${ts()} [${m.type()}] ${m.text()}\n`));
page.on('pageerror', e => clog.write(`${ts()} [pageerror] ${e}\n`));
const state = async () => page.evaluate(() => {
  const all = []; const visit = (root) => { for (const el of root.querySelectorAll('*')) { all.push(el); if (el.shadowRoot) visit(el.shadowRoot); } }; visit(document);
  const t = document.body.innerText;
  const groups = all.filter(e => e.classList && e.classList.contains('chat-group')).map(g => {
    const role = ['user','assistant','tool','system'].find(r => g.classList.contains(r)) || g.className;
    const bubbles = [...g.querySelectorAll('.chat-bubble')].map(b => {
      const dup = b.querySelector('.chat-duplicate-count') || g.querySelector('.chat-duplicate-count');
      const txt = (b.querySelector('.chat-text')?.innerText ?? b.innerText).trim().replace(/\s+/g, ' ').slice(0, 80);
      return txt + (dup ? ` [${dup.textContent}]` : '');
    });
    const extra = [...g.querySelectorAll('.chat-group-footer')].map(f => f.innerText.trim().replace(/\s+/g,' ')).join('|');
    return { role, cls: g.className.replace(/\s+/g,' '), bubbles, footer: extra.slice(0, 80) };
  });
  const dups = all.filter(e => e.classList && e.classList.contains('chat-duplicate-count')).map(e => e.textContent);
  const alerts = all.filter(e => e.matches && e.matches('[role=alert],[role=status],.toast,[class*=toast],[class*=banner],[class*=callout]'))
    .map(e => (e.className + ': ' + (e.innerText || '').trim().replace(/\s+/g, ' ')).slice(0, 160)).filter(s => !/:\s*$/.test(s) && !/mount-fallback/.test(s));
  return { working: /Working/i.test(t), sending: /Sending message/i.test(t), unconfirmed: /Delivery unconfirmed/i.test(t),
    unknownMethod: (t.match(/unknown method[^\n]*/gi) || []), dups, alerts, groups };
});
const shot = async (n) => {
  await page.screenshot({ path: `${OUT}/${n}.png` });
  fs.writeFileSync(`${OUT}/${n}.txt`, await page.evaluate(() => document.body.innerText));
  const s = await state();
  fs.writeFileSync(`${OUT}/${n}.json`, JSON.stringify(s, null, 1));
  console.log(ts(), 'shot', n, page.url(), JSON.stringify({ working: s.working, sending: s.sending, unconfirmed: s.unconfirmed, unknownMethod: s.unknownMethod, dups: s.dups, alerts: s.alerts }));
  for (const g of s.groups) console.log('    ', g.role.padEnd(9), JSON.stringify(g.bubbles), g.footer ? '| ' + g.footer : '');
};
await page.goto(`http://127.0.0.1:18800/#token=${encodeURIComponent(token)}`);
await page.waitForTimeout(6000);
await shot('00-loaded');
const texts = ['alpha one pass four', 'bravo two pass four', 'charlie three pass four'];
for (let i = 1; i <= 3; i++) {
  const text = texts[i - 1];
  const ta = page.getByLabel('Chat composer');
  await ta.click(); await ta.fill(text);
  await page.waitForTimeout(300);
  await ta.press('Enter');
  console.log(ts(), 'sent', i, text);
  const t1 = Date.now();
  await page.waitForFunction((e) => document.body.innerText.includes(e), 'Echo: ' + text, { timeout: 30000 }).then(() => console.log(ts(), 'reply visible after', Date.now() - t1, 'ms')).catch(e => console.log(ts(), 'NO REPLY', String(e).slice(0, 100)));
  await page.waitForTimeout(1000); await shot(`${i}a-reply+1s`);
  await page.waitForTimeout(5000); await shot(`${i}b-reply+6s`);
  await page.waitForTimeout(14000); await shot(`${i}c-reply+20s`);
}
await page.reload(); await page.waitForTimeout(6000); await shot('4a-reloaded');
await page.waitForTimeout(10000); await shot('4b-reloaded+10s');
await page.reload(); await page.waitForTimeout(6000); await shot('4c-reloaded-again');
await ctx.close();
fs.rmSync(udd, { recursive: true, force: true });
console.log(ts(), 'done');
