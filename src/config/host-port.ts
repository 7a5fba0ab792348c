// listen and metrics_listen: an IPv4 address or name, or a bracketed IPv6 address, then a port.
import { isIP } from 'node:net';

export function parseHostPort(text: string): { host: string; port: number } | null {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text);
  if (!m) return null;
  const port = Number(m[3]);
  if (port > 65535) return null;
  const host = m[1] ?? m[2]!;
  if (m[1] !== undefined && isIP(host) !== 6) return null;
  return { host, port };
}
