#!/usr/bin/env node
// Entry point: the environment is read here, once, and handed to the CLI.
import cluster from 'node:cluster';
import { runCli } from './cli/main.ts';
import { VERSION } from './version.ts';

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

// A closed output pipe (`svc serve 2>&1 | head`) must not stop svc: what cannot be written is dropped.
for (const stream of [process.stdout, process.stderr]) stream.on('error', () => undefined);

// node:cluster starts a worker as `<node> <script> <args>`; inside the single executable the "script" is the
// executable itself, and arrives as the first argument.
const args = process.argv.slice(2);
if (cluster.isWorker && args[0] === process.execPath) args.shift();

void runCli(
  args,
  { ...process.env },
  {
    out: (line) => process.stdout.write(`${line}\n`),
    err: (line) => process.stderr.write(`${line}\n`),
    readStdin,
    version: VERSION,
  },
)
  .then((code) => {
    process.exitCode = code;
  })
  .catch((e: unknown) => {
    // Whatever escaped the command (a native addon that cannot be loaded, say): one line, no stack.
    process.stderr.write(`svc: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  });
