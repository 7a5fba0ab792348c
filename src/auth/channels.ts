// The channels this configuration enables, in the order the auth core tries them.
import type { Config } from '../config/load.ts';
import type { Database } from '../db/open.ts';
import type { Channel } from './core.ts';
import { tokenChannel } from './channels/token.ts';
import { sessionChannel } from './channels/session.ts';
import { headerChannel } from './channels/header.ts';
import { silentLogger, type Logger } from '../log.ts';

export function channelsFor(config: Config, database: Database, log: Logger = silentLogger): Channel[] {
  const channels: Channel[] = [tokenChannel(database, config.auth.token)];
  if (config.auth.header) channels.push(headerChannel(database, config.auth.header, config.auth.groups, log));
  if (config.auth.session) channels.push(sessionChannel(database, config.auth.session));
  return channels;
}
