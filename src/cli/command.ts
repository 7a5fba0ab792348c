// The shape of one CLI command; the registry is in commands.ts.
import type { ParseArgsConfig } from 'node:util';
import type { Config } from '../config/load.ts';
import { userInfo } from 'node:os';
import { openDatabase, type Database } from '../db/open.ts';
import type { Actor } from '../store/audit.ts';

export interface Io {
  out(line: string): void;
  err(line: string): void;
  /** all of standard input, for --password-stdin and item text */
  readStdin(): Promise<string>;
  readonly version: string;
}

export interface CommandContext {
  readonly values: Record<string, string | boolean | undefined | (string | boolean)[]>;
  readonly positionals: readonly string[];
  /** loads and validates the configuration (throws ConfigError) */
  config(): Config;
  readonly configPath: string;
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly io: Io;
}

export interface Command {
  readonly name: readonly string[];
  readonly usage: string;
  readonly summary: string;
  readonly help: string;
  readonly positionals: readonly string[];
  readonly options: NonNullable<ParseArgsConfig['options']>;
  readonly configMode: 'serve' | 'data';
  run(ctx: CommandContext): Promise<number>;
}

/** Who acts on the CLI, for the audit trail: the operating-system user, through `cli`. */
export function cliActor(): Actor {
  let uid = 'unknown';
  try {
    uid = userInfo().username;
  } catch {
    // no name for this uid
  }
  return { uid, via: 'cli', peer: null };
}

/** Opens the configured database with pending migrations applied, runs `fn`, and closes it. */
export async function withDatabase<T>(config: Config, fn: (database: Database) => Promise<T>): Promise<T> {
  const database = await openDatabase(config.server.database, config.server.databaseToken);
  try {
    await database.migrate();
    return await fn(database);
  } finally {
    database.close();
  }
}

export function str(ctx: CommandContext, key: string): string | undefined {
  const v = ctx.values[key];
  return typeof v === 'string' ? v : undefined;
}

export function flag(ctx: CommandContext, key: string): boolean | undefined {
  const v = ctx.values[key];
  return typeof v === 'boolean' ? v : undefined;
}

/** A password from standard input: one line, the trailing newline removed. */
export async function passwordFromStdin(io: Io): Promise<string> {
  const text = await io.readStdin();
  return text.replace(/\r?\n$/, '');
}
