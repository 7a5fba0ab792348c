// Session cookies from password or single sign-on logins. A stale or forged cookie is not an error: the
// caller is simply anonymous and gets the login page.
import type { Database } from '../../db/open.ts';
import type { SessionConfig } from '../../config/load.ts';
import { sessionUser } from '../../store/sessions.ts';
import { verifySignedId } from '../../domain/secrets.ts';
import type { Channel } from '../core.ts';

export function sessionChannel(database: Database, session: SessionConfig): Channel {
  return {
    name: 'session',
    async authenticate(request) {
      const value = request.cookie(session.cookieName);
      if (value === undefined) return null;
      const id = verifySignedId(value, session.secret);
      if (id === null) return null;
      const user = await sessionUser(database.db, id, database.now());
      return user ? { user, via: 'session', sessionId: id } : null;
    },
  };
}
