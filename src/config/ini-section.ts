// An ordinary `key = value` section of svc.ini ([server], [notify]): parsed with `ini`, with repeated and unknown
// keys reported by line, so a typo never silently turns a setting off.
import ini from 'ini';

export type Lines = { text: string; line: number }[];

export interface IniSection {
  /** the trimmed value, or `fallback` when the key is absent */
  str(key: string, fallback: string): string;
  /** true or false (the `ini` package reads both as booleans), or `fallback` when the key is absent */
  bool(key: string, fallback: boolean): boolean;
  /** the keys that start with `prefix` (declared in `options.prefixes`), without it, with their values */
  prefixed(prefix: string): [key: string, value: unknown][];
  /**
   * The value as written on its line, for values that are command lines or arbitrary text: `ini` cuts a value at
   * any `;` or `#` and unquotes it its own way. Here a comment starts only at a `;` or `#` after white space and
   * outside quotes, and quotes are kept. undefined when the key is absent.
   */
  verbatim(key: string): string | undefined;
}

/** A line's value after the first `=`, without a trailing comment (`;` or `#` after white space, outside quotes). */
export function valueAsWritten(line: string): string {
  const text = line.slice(line.indexOf('=') + 1);
  let quote: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]!;
    if (quote !== null) {
      if (ch === quote) quote = null;
    } else if (ch === '"' || ch === "'") quote = ch;
    else if ((ch === ';' || ch === '#') && (i === 0 || /\s/.test(text[i - 1]!))) return text.slice(0, i).trim();
  }
  return text.trim();
}

export interface SectionOptions {
  /** how the section's header is written in svc.ini (default `[name]`) */
  readonly header?: string;
  /** key prefixes that stand for a family of keys, such as `env.` */
  readonly prefixes?: readonly string[];
}

export function readIniSection(
  name: string,
  lines: Lines | undefined,
  keys: readonly string[],
  problems: string[],
  options: SectionOptions = {},
): IniSection {
  const prefixes = options.prefixes ?? [];
  const raw: Record<string, unknown> = lines ? { ...ini.parse(lines.map((l) => l.text).join('\n')) } : {};
  const seen = new Map<string, number>();
  const written = new Map<string, string>();
  for (const { text, line } of lines ?? []) {
    const m = /^\s*([^=;#\s[][^=]*?)\s*(=|$)/.exec(text);
    if (!m || text.trim().startsWith(';') || text.trim().startsWith('#')) continue;
    const key = m[1]!;
    if (seen.has(key)) problems.push(`${name}.${key}: given twice (lines ${seen.get(key)} and ${line})`);
    seen.set(key, line);
    if (m[2] === '=') written.set(key, valueAsWritten(text));
  }
  for (const key of Object.keys(raw)) {
    if (!keys.includes(key) && !prefixes.some((p) => key.startsWith(p))) {
      const family = prefixes.map((p) => `${p}*`);
      problems.push(`${name}.${key}: unknown key; ${options.header ?? `[${name}]`} takes ${[...keys, ...family].join(', ')}`);
    }
  }
  return {
    str(key, fallback) {
      const v = raw[key];
      if (v === undefined) return fallback;
      if (typeof v !== 'string') {
        problems.push(`${name}.${key}: expected a single value`);
        return fallback;
      }
      return v.trim();
    },
    bool(key, fallback) {
      const v = raw[key];
      if (v === undefined) return fallback;
      if (typeof v === 'boolean') return v;
      problems.push(`${name}.${key}: "${String(v).slice(0, 40)}" is not true or false`);
      return fallback;
    },
    prefixed(prefix) {
      return Object.entries(raw)
        .filter(([k]) => k.startsWith(prefix))
        .map(([k, v]) => [k.slice(prefix.length), v]);
    },
    verbatim(key) {
      return raw[key] === undefined ? undefined : written.get(key);
    },
  };
}

export type Env = Readonly<Record<string, string | undefined>>;
export const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

/** A secret named by an `_env` key: the variable's value, or null with a problem naming the variable (never the value). */
export function readEnv(path: string, name: string, env: Env, problems: string[]): string | null {
  if (!ENV_NAME.test(name)) {
    problems.push(`${path}: "${name}" is not an environment variable name`);
    return null;
  }
  const value = env[name];
  if (value === undefined || value === '') {
    problems.push(`${path}: environment variable ${name} is not set`);
    return null;
  }
  return value;
}
