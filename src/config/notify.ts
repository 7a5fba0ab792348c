// [notify]: mail to users. The SMTP URL carries credentials, so it comes from an environment variable and no message
// ever repeats it.
import { readDuration } from './duration.ts';
import { readIniSection, readEnv, type Env, type Lines } from './ini-section.ts';

export interface NotifyConfig {
  /** smtp:// or smtps:// with credentials; null where the command only records notices (the data commands) */
  readonly smtpUrl: string | null;
  readonly from: string;
  /** a token is announced once when it comes this close to expiring (seconds) */
  readonly expiryWarningSeconds: number;
}

const NOTIFY_KEYS = ['smtp_url_env', 'from', 'expiry_warning'] as const;
const ADDRESS = /^[^\s@<>"]+@[^\s@<>"]+$/;

export function readNotify(lines: Lines | undefined, env: Env, readSecret: boolean, problems: string[]): NotifyConfig {
  const section = readIniSection('notify', lines, NOTIFY_KEYS, problems);
  const smtpEnv = section.str('smtp_url_env', '');
  let smtpUrl: string | null = null;
  if (smtpEnv === '')
    problems.push('notify.smtp_url_env: required; name the environment variable that holds smtp:// or smtps:// with credentials');
  else if (readSecret) {
    smtpUrl = readEnv('notify.smtp_url_env', smtpEnv, env, problems);
    if (smtpUrl !== null && !validSmtpUrl(smtpUrl)) {
      problems.push(
        `notify.smtp_url_env: ${smtpEnv} must hold an smtp:// or smtps:// URL with a host, such as smtps://user:password@mail.example.com:465`,
      );
      smtpUrl = null;
    }
  }
  const from = section.str('from', '');
  if (!ADDRESS.test(from))
    problems.push(`notify.from: ${from === '' ? 'required' : `"${from}" is not a mail address`}, such as svc@example.com`);
  const expiryWarningSeconds = readDuration('notify.expiry_warning', section.str('expiry_warning', '7d'), problems);
  return { smtpUrl, from, expiryWarningSeconds: expiryWarningSeconds ?? 0 };
}

function validSmtpUrl(text: string): boolean {
  try {
    const u = new URL(text);
    return (u.protocol === 'smtp:' || u.protocol === 'smtps:') && u.hostname !== '';
  } catch {
    return false;
  }
}
