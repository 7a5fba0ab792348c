// Password hashing: argon2id with OWASP's parameters, PHC strings, run on libuv's thread pool so the event
// loop stays free. Only login and password changes call this.
// The native addon is loaded at first use, so commands that hash nothing never load it (nor, in the single
// executable, unpack it).
import { availableParallelism } from 'node:os';

let loaded: Promise<typeof import('@node-rs/argon2')> | null = null;
/**
 * The addon, imported once: every later call has it after a microtask, not another trip through the loader. An
 * import that failed is tried again by the next call, as before it was kept.
 */
const argon2 = () => {
  loaded ??= import('@node-rs/argon2').catch((e: unknown) => {
    loaded = null;
    throw e;
  });
  return loaded;
};

/**
 * Hashes at once. libuv's thread pool (UV_THREADPOOL_SIZE threads, 4 unless set) also makes every WebCrypto
 * signature and verification (identity assertions for upstreams, ID-JAG, OIDC) and resolves host names: a flood of
 * sign-ins waits here, in order, and leaves two of its threads to those. More hashes at once than cores would not
 * finish any sooner.
 */
const HASHES_AT_ONCE = Math.max(1, Math.min(availableParallelism(), (Number(process.env.UV_THREADPOOL_SIZE) || 4) - 2));
let hashing = 0;
const waiting: (() => void)[] = [];

async function inTurn<T>(work: () => Promise<T>): Promise<T> {
  if (hashing < HASHES_AT_ONCE) hashing++;
  else await new Promise<void>((take) => waiting.push(take));
  try {
    return await work();
  } finally {
    // The turn goes straight to the next in line, or is given back.
    const next = waiting.shift();
    if (next) next();
    else hashing--;
  }
}

/** Argon2id (Algorithm.Argon2id = 2), m=19 MiB, t=2, p=1: OWASP's parameters. */
const PARAMS = { algorithm: 2, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;
const PHC_PARAMS = `$argon2id$v=19$m=${PARAMS.memoryCost},t=${PARAMS.timeCost},p=${PARAMS.parallelism}$`;

export async function hashPassword(password: string): Promise<string> {
  const { hash } = await argon2();
  return inTurn(() => hash(password, PARAMS));
}

export async function verifyPassword(phc: string, password: string): Promise<boolean> {
  const { verify } = await argon2();
  try {
    return await inTurn(() => verify(phc, password));
  } catch {
    return false;
  }
}

/** True when the stored hash was made with other parameters; login then stores a fresh one. */
export function needsRehash(phc: string): boolean {
  return !phc.startsWith(PHC_PARAMS);
}

// Compared against when the account does not exist or has no password, so both cost one verification.
let dummy: Promise<string> | null = null;
export function dummyHash(): Promise<string> {
  dummy ??= hashPassword('svc dummy password for constant-time login');
  return dummy;
}
