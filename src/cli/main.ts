// `svc <command>`: parses arguments, loads the configuration once, runs one command, maps failures to exit
// codes (0 ok, 78 configuration, 1 anything else) and one-line messages.
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { loadConfig, ConfigError, type Config, type LoadOptions } from '../config/load.ts';
import { AppError } from '../domain/errors.ts';
import { COMMANDS } from './commands.ts';
import type { Command, Io } from './command.ts';
import { UsageError } from './errors.ts';
import { safeDatabaseMessage } from '../db/errors.ts';

export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_CONFIG = 78;

const GLOBAL_HELP = `Usage: svc <command> [options]

An MCP endpoint over access-labelled documents, with built-in authentication.

Commands:
${COMMANDS.map((c) => `  ${c.usage.padEnd(44)} ${c.summary}`).join('\n')}

Options for every command:
  --config PATH   configuration file (default: $SVC_CONFIG, else ./svc.ini)
  --help          show help for svc or a command
  --version       print the version

Exit status: 0 success, 78 configuration error, 1 any other failure.`;

/**
 * `--config PATH` (or `--config=PATH`) taken from anywhere on the line, before the command as after it, as most
 * command-line tools allow; the rest is left in order. More than one is refused rather than guessed between.
 */
function takeConfigOption(argv: readonly string[]): { args: string[]; config: string | undefined; problem: string | null } {
  const args: string[] = [];
  const given: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (arg === '--') {
      args.push(...argv.slice(i));
      break;
    }
    if (arg === '--config') given.push(argv[++i] ?? '');
    else if (arg.startsWith('--config=')) given.push(arg.slice('--config='.length));
    else args.push(arg);
  }
  // A path that looks like an option (`--config --email x`, `--config --`) is a mistake, never a file name.
  const problem =
    given.length > 1
      ? '--config: give it once'
      : given[0] === '' || given[0]?.startsWith('-')
        ? '--config: give the PATH of the configuration file'
        : null;
  return { args, config: given[0], problem };
}

export async function runCli(argv: readonly string[], env: Readonly<Record<string, string | undefined>>, io: Io): Promise<number> {
  const { args, config: configOption, problem: configProblem } = takeConfigOption(argv);
  if (args.length === 0 || args[0] === '--help' || args[0] === '-h' || args[0] === 'help') {
    io.out(GLOBAL_HELP);
    return args.length === 0 ? EXIT_FAILURE : EXIT_OK;
  }
  if (args[0] === '--version') {
    io.out(`svc ${io.version}`);
    return EXIT_OK;
  }
  const command = findCommand(args);
  if (!command) {
    io.err(`svc: unknown command "${args.slice(0, 2).join(' ')}"; run svc --help`);
    return EXIT_FAILURE;
  }
  const rest = args.slice(command.name.length);
  try {
    if (configProblem) throw new UsageError(configProblem);
    const options = { help: { type: 'boolean', short: 'h' }, ...command.options } as NonNullable<ParseArgsConfig['options']>;
    let parsed: ReturnType<typeof parseArgs>;
    try {
      parsed = parseArgs({ args: rest, options, allowPositionals: true, allowNegative: true, strict: true } as ParseArgsConfig);
    } catch (e) {
      throw new UsageError((e as Error).message.replace(/\. To specify a positional argument.*$/s, ''));
    }
    if (parsed.values.help) {
      io.out(`Usage: svc ${command.usage}\n\n${command.help}`);
      return EXIT_OK;
    }
    if (parsed.positionals.length !== command.positionals.length) {
      throw new UsageError(`expected ${command.positionals.length === 0 ? 'no arguments' : command.positionals.join(' ')}`);
    }
    const configPath = configOption ?? env.SVC_CONFIG ?? 'svc.ini';
    const config = () => readConfig(configPath, env, { mode: command.configMode });
    return await command.run({ values: parsed.values, positionals: parsed.positionals, config, configPath, env, io });
  } catch (e) {
    return report(e, command, io);
  }
}

function findCommand(args: readonly string[]): Command | undefined {
  return COMMANDS.find((c) => c.name.every((word, i) => args[i] === word));
}

export function readConfig(path: string, env: Readonly<Record<string, string | undefined>>, options: LoadOptions): Config {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'no such file (give --config PATH, or set SVC_CONFIG)' : `cannot be read (${code})`;
    throw new ConfigError([`svc: config: ${path}: ${why}`]);
  }
  return loadConfig(text, env, { ...options, baseDir: dirname(resolve(path)) });
}

function report(e: unknown, command: Command, io: Io): number {
  if (e instanceof ConfigError) {
    for (const p of e.problems) io.err(p);
    return EXIT_CONFIG;
  }
  if (e instanceof UsageError) {
    io.err(`svc ${command.name.join(' ')}: ${e.message}\nUsage: svc ${command.usage}`);
    return EXIT_FAILURE;
  }
  if (e instanceof AppError) {
    io.err(`svc ${command.name.join(' ')}: ${e.message}`);
    return EXIT_FAILURE;
  }
  // One line that says what went wrong; a database error never carries the values it was given.
  io.err(`svc ${command.name.join(' ')}: ${safeDatabaseMessage(e).split('\n').join('\n  ')}`);
  return EXIT_FAILURE;
}
