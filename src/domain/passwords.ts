// What a password must be. Hashing and verifying are in auth/passwords.ts.

export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 1024;

export function passwordProblem(password: string): string | null {
  if (password.length < PASSWORD_MIN) return `a password has at least ${PASSWORD_MIN} characters`;
  if (password.length > PASSWORD_MAX) return `a password has at most ${PASSWORD_MAX} characters`;
  return null;
}
