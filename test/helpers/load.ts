// Load from one address as a real client pool makes it: at most `sockets` kept-alive connections. fetch's own pool
// opens a new connection whenever a request finds none free at that instant (a socket is freed a tick after its
// response ends), so 50 loops of requests reach svc's 100 connections per address under load, and the 101st is
// refused as it should be. This pool queues requests instead.
import http from 'node:http';

export interface LoadClient {
  /** POSTs `body` to `url`; the status and the whole answer */
  post(url: string, headers: Record<string, string>, body: string): Promise<{ status: number; body: string }>;
  close(): void;
}

export function loadClient(sockets: number): LoadClient {
  const agent = new http.Agent({ keepAlive: true, maxSockets: sockets });
  return {
    post: (url, headers, body) =>
      new Promise((resolve, reject) => {
        const request = http.request(
          url,
          { method: 'POST', agent, headers: { ...headers, 'content-length': Buffer.byteLength(body) } },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString() }));
            res.on('error', reject);
          },
        );
        request.on('error', reject);
        request.end(body);
      }),
    close: () => agent.destroy(),
  };
}
