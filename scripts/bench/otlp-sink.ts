// A minimal OTLP/HTTP trace receiver for part 1's svc with tracing on, run as its own process (the bench pins it to
// core 1, with the load generator, so that none of its CPU lands in svc's process or on svc's core):
//   tsx scripts/bench/otlp-sink.ts PORT
// POST /v1/traces: reads the body, answers 200 with an empty ExportTraceServiceResponse (application/x-protobuf).
// GET /counts: what arrived so far, as JSON: export requests, bytes, spans, spans by name, and this process's CPU time.
// Spans are counted by walking the protobuf wire format (ExportTraceServiceRequest.resource_spans = 1 →
// ResourceSpans.scope_spans = 2 → ScopeSpans.spans = 2, Span.name = 5) without decoding the rest, so the count costs
// a few operations a span: the figure says the tracer really exports, not merely that it runs.
import { createServer } from 'node:http';

const port = Number(process.argv[2]);

let requests = 0;
let bytes = 0;
let spans = 0;
let malformed = 0;
const names = new Map<string, number>();

/** Calls `each(field, start, end)` for every length-delimited field of buf[start, end); skips the other wire types. */
function walk(buf: Buffer, start: number, end: number, each: (field: number, from: number, to: number) => void): void {
  let at = start;
  const varint = (): number => {
    let value = 0;
    let shift = 0;
    for (;;) {
      if (at >= end) throw new Error('truncated varint');
      const b = buf[at++]!;
      value += (b & 0x7f) * 2 ** shift;
      if (b < 0x80) return value;
      shift += 7;
    }
  };
  while (at < end) {
    const key = varint();
    const field = Math.floor(key / 8);
    switch (key & 7) {
      case 0:
        varint();
        break;
      case 1:
        at += 8;
        break;
      case 2: {
        const length = varint();
        if (at + length > end) throw new Error('truncated field');
        each(field, at, at + length);
        at += length;
        break;
      }
      case 5:
        at += 4;
        break;
      default:
        throw new Error(`wire type ${key & 7}`);
    }
  }
}

function count(body: Buffer): void {
  walk(body, 0, body.length, (f, a, b) => {
    if (f !== 1) return; // resource_spans
    walk(body, a, b, (f, a, b) => {
      if (f !== 2) return; // scope_spans
      walk(body, a, b, (f, a, b) => {
        if (f !== 2) return; // spans
        spans++;
        walk(body, a, b, (f, a, b) => {
          if (f !== 5) return; // name
          const name = body.toString('latin1', a, b);
          names.set(name, (names.get(name) ?? 0) + 1);
        });
      });
    });
  });
}

const server = createServer((request, response) => {
  if (request.method === 'GET' && request.url === '/counts') {
    const cpu = process.cpuUsage();
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(
      JSON.stringify({ requests, bytes, spans, malformed, names: Object.fromEntries(names), cpuMs: (cpu.user + cpu.system) / 1000 }),
    );
    return;
  }
  if (request.method !== 'POST' || request.url !== '/v1/traces') {
    response.writeHead(404).end();
    return;
  }
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    const body = Buffer.concat(chunks);
    requests++;
    bytes += body.length;
    try {
      count(body);
    } catch {
      malformed++;
    }
    // An empty ExportTraceServiceResponse: zero bytes (no partial_success).
    response.writeHead(200, { 'content-type': 'application/x-protobuf', 'content-length': '0' });
    response.end();
  });
});
server.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
process.once('SIGINT', () => process.exit(0));
