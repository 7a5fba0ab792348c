// The bench's records: its user and its tokens, as the store takes them.
import type { NewUser } from '../../src/store/users.ts';
import type { NewToken } from '../../src/store/tokens.ts';

/** The bench's user, with these labels. */
export const benchUser = (labels: readonly string[]): NewUser => ({
  uid: 'bench',
  email: 'bench@example.com',
  name: '',
  labels,
  admin: false,
  passwordHash: null,
});

/** An unrestricted `mcp` token named `name`, that never expires. */
export const benchToken = (name: string): NewToken => ({ name, ttlSeconds: null, restriction: null, scopes: ['mcp'] });
