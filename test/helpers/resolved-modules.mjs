// A module resolve hook (node:module register) that tells the registering thread every URL it resolves: how
// test/lazy-loads.test.ts sees which libraries a module pulls in.
let port;

export function initialize(data) {
  port = data.port;
}

export async function resolve(specifier, context, next) {
  const resolved = await next(specifier, context);
  port.postMessage(resolved.url);
  return resolved;
}
