// What svc's OAuth server works with. Its refusals are OauthProtocolError (domain/errors.ts); the HTTP routes
// translate its answers, and nothing here knows about requests or pages.
import type { Database } from '../db/open.ts';
import type { OauthConfig } from '../config/load.ts';
import type { Logger } from '../log.ts';

export interface OauthServer {
  readonly database: Database;
  readonly config: OauthConfig;
  /** base_url: the issuer, and the root of every URL svc hands out */
  readonly base: string;
  readonly log: Logger;
}
