// Counts an operator watches: users, sessions not yet expired, tokens neither expired nor revoked.
import { sql } from 'drizzle-orm';
import type { Db } from '../db/open.ts';

export interface Population {
  readonly users: number;
  readonly activeSessions: number;
  readonly activeTokens: number;
}

export async function population(db: Db, now = Date.now()): Promise<Population> {
  const row = await db.get<{ users: number; sessions: number; tokens: number }>(sql`
    SELECT (SELECT count(*) FROM users) AS users,
           (SELECT count(*) FROM sessions WHERE expires_at > ${now}) AS sessions,
           (SELECT count(*) FROM tokens WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${now})) AS tokens`);
  return { users: Number(row.users), activeSessions: Number(row.sessions), activeTokens: Number(row.tokens) };
}
