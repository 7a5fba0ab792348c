// What svc's OAuth server works with, and the error shape of its protocol answers (RFC 6749 §5.2). The HTTP routes
// translate these answers; nothing here knows about requests or pages.
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

export interface OauthError {
  readonly error: string;
  readonly error_description: string;
}

export const oauthError = (error: string, description: string): OauthError => ({ error, error_description: description });

export const isOauthError = (x: object): x is OauthError => 'error' in x;
