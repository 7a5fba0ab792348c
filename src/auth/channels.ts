// The channels this configuration enables, in the order the auth core tries them.
import type { Config } from '../config/load.ts';
import type { Db } from '../db/open.ts';
import type { Channel } from './core.ts';
import { tokenChannel } from './channels/token.ts';
import { sessionChannel } from './channels/session.ts';

export function channelsFor(config: Config, db: Db): Channel[] {
  const channels: Channel[] = [tokenChannel(db, config.auth.token)];
  if (config.auth.session) channels.push(sessionChannel(db, config.auth.session));
  return channels;
}
