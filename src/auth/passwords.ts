// Password hashing: argon2id with OWASP's parameters, PHC strings, run on libuv's thread pool so the event
// loop stays free. Only login and password changes call this.
// The native addon is loaded at first use, so commands that hash nothing never load it (nor, in the single
// executable, unpack it).
const argon2 = () => import('@node-rs/argon2');

/** Argon2id (Algorithm.Argon2id = 2), m=19 MiB, t=2, p=1: OWASP's parameters. */
const PARAMS = { algorithm: 2, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;
const PHC_PARAMS = `$argon2id$v=19$m=${PARAMS.memoryCost},t=${PARAMS.timeCost},p=${PARAMS.parallelism}$`;

export async function hashPassword(password: string): Promise<string> {
  return (await argon2()).hash(password, PARAMS);
}

export async function verifyPassword(phc: string, password: string): Promise<boolean> {
  const { verify } = await argon2();
  try {
    return await verify(phc, password);
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
