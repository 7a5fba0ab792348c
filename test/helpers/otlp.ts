// An OTLP/HTTP trace receiver on loopback, as a collector would be: it takes what svc exports at /v1/traces, decodes it
// with the OpenTelemetry project's own protobuf definitions (the generated code published in
// @opentelemetry/otlp-transformer 0.57, installed as otlp-proto-definitions) or as OTLP/JSON, and keeps every span
// with its resource, and every body as it came (to scan for secrets). `hang` accepts each request and never answers.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { waitFor } from './wait.ts';

const require = createRequire(import.meta.url);
interface ProtoMessage {
  decode(bytes: Uint8Array): unknown;
  toObject(message: unknown, options: Record<string, unknown>): unknown;
}
const root = require('otlp-proto-definitions/build/src/generated/root.js') as {
  opentelemetry: { proto: { collector: { trace: { v1: { ExportTraceServiceRequest: ProtoMessage } } } } };
};
const REQUEST = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

export type AttributeValue = string | number | boolean;

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  /** '' for a root span */
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client */
  readonly kind: number;
  readonly attributes: Readonly<Record<string, AttributeValue>>;
  /** OTLP's status code: 0 unset, 1 ok, 2 error */
  readonly status: number;
  readonly links: readonly { traceId: string; spanId: string }[];
  readonly events: readonly unknown[];
  readonly resource: Readonly<Record<string, AttributeValue>>;
  /** the content type it came in */
  readonly protocol: 'protobuf' | 'json';
}

export interface Receiver {
  /** the endpoint to give as OTEL_EXPORTER_OTLP_ENDPOINT */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  /** every body as received (protobuf as latin1 text), for scanning */
  readonly bodies: string[];
  /** how many export requests arrived (a hanging receiver counts them without answering) */
  requests(): number;
  /** resolves once spans matching `match` have arrived */
  spansOf(what: string, match: (s: ReceivedSpan) => boolean, count?: number): Promise<ReceivedSpan[]>;
  close(): Promise<void>;
}

type KeyValue = { key: string; value: Record<string, unknown> };

function attributeValue(v: Record<string, unknown>): AttributeValue {
  if ('stringValue' in v) return String(v.stringValue);
  if ('boolValue' in v) return Boolean(v.boolValue);
  if ('intValue' in v) return Number(v.intValue);
  if ('doubleValue' in v) return Number(v.doubleValue);
  return JSON.stringify(v);
}

function attributesOf(list: unknown): Record<string, AttributeValue> {
  const out: Record<string, AttributeValue> = {};
  for (const kv of (list ?? []) as KeyValue[]) out[kv.key] = attributeValue(kv.value ?? {});
  return out;
}

/** An id as hex: protobuf gives bytes (here base64), OTLP/JSON gives hex already. */
const hex = (id: unknown, protocol: 'protobuf' | 'json') =>
  typeof id !== 'string' || id === '' ? '' : protocol === 'json' ? id.toLowerCase() : Buffer.from(id, 'base64').toString('hex');

interface Decoded {
  resourceSpans?: {
    resource?: { attributes?: unknown };
    scopeSpans?: {
      spans?: {
        traceId?: string;
        spanId?: string;
        parentSpanId?: string;
        name?: string;
        kind?: number | string;
        attributes?: unknown;
        status?: { code?: number | string };
        links?: { traceId?: string; spanId?: string }[];
        events?: unknown[];
      }[];
    }[];
  }[];
}

function spansIn(decoded: Decoded, protocol: 'protobuf' | 'json'): ReceivedSpan[] {
  const spans: ReceivedSpan[] = [];
  for (const rs of decoded.resourceSpans ?? []) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? [])
      for (const s of ss.spans ?? [])
        spans.push({
          traceId: hex(s.traceId, protocol),
          spanId: hex(s.spanId, protocol),
          parentSpanId: hex(s.parentSpanId, protocol),
          name: s.name ?? '',
          kind: Number(s.kind ?? 0),
          attributes: attributesOf(s.attributes),
          status: Number(s.status?.code ?? 0),
          links: (s.links ?? []).map((l) => ({ traceId: hex(l.traceId, protocol), spanId: hex(l.spanId, protocol) })),
          events: s.events ?? [],
          resource,
          protocol,
        });
  }
  return spans;
}

async function bodyOf(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export async function startReceiver(options: { hang?: boolean } = {}): Promise<Receiver> {
  const spans: ReceivedSpan[] = [];
  const bodies: string[] = [];
  let requests = 0;
  const hanging: ServerResponse[] = [];
  const server = createServer(async (req, res) => {
    requests++;
    if (options.hang) {
      hanging.push(res);
      return;
    }
    const body = await bodyOf(req);
    bodies.push(body.toString('latin1'));
    if (req.url !== '/v1/traces') {
      res.writeHead(404).end();
      return;
    }
    const type = req.headers['content-type'] ?? '';
    if (type.startsWith('application/x-protobuf')) {
      const decoded = REQUEST.toObject(REQUEST.decode(body), { longs: String, enums: Number, bytes: String, defaults: false });
      spans.push(...spansIn(decoded as Decoded, 'protobuf'));
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    } else if (type.startsWith('application/json')) {
      spans.push(...spansIn(JSON.parse(body.toString('utf8')) as Decoded, 'json'));
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    } else res.writeHead(415).end();
  });
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    spans,
    bodies,
    requests: () => requests,
    async spansOf(what, match, count = 1) {
      await waitFor(what, () => spans.filter(match).length >= count, { everyMs: 50, timeoutMs: 20_000 });
      return spans.filter(match);
    },
    async close() {
      for (const res of hanging) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((ok) => server.close(() => ok()));
    },
  };
}
