// One autocannon run against /mcp `tools/call whoami`, as its own process (so its CPU placement can be chosen):
//   tsx scripts/bench/load.ts URL TOKEN SECONDS [CONNECTIONS=50]  -> prints {"rate": req/s, "p50": ms, "p99": ms, "bad": n} on stdout
// (p50 and p99 from each response's own time: timed.ts)
import { timedLoad } from './timed.ts';

const [url, token, seconds, connections = '50'] = process.argv.slice(2) as [string, string, string, string?];
const { result: r, pct } = await timedLoad({
  url,
  method: 'POST',
  connections: Number(connections),
  duration: Number(seconds),
  headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'whoami', arguments: {} } }),
});
process.stdout.write(`${JSON.stringify({ rate: r.requests.average, p50: pct(50), p99: pct(99), bad: r.non2xx + r.errors })}\n`);
