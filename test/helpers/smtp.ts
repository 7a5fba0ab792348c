// A real SMTP server as the mail peer (the smtp-server package): it asks for the credentials svc was given and
// records each message it accepts, parsed with mailparser as a mail client would.
import { SMTPServer } from 'smtp-server';
import { simpleParser } from 'mailparser';

export interface ReceivedMail {
  readonly from: string;
  readonly to: string;
  readonly subject: string;
  readonly text: string;
  readonly html: string;
  readonly raw: string;
}

export interface SmtpPeer {
  readonly received: ReceivedMail[];
  /** user names that signed in */
  readonly logins: string[];
  stop(): Promise<void>;
}

export async function startSmtpPeer(port: number, credentials: { user: string; pass: string }): Promise<SmtpPeer> {
  const received: ReceivedMail[] = [];
  const logins: string[] = [];
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    authOptional: false,
    logger: false,
    onAuth(auth, _session, callback) {
      if (auth.username === credentials.user && auth.password === credentials.pass) {
        logins.push(auth.username!);
        callback(null, { user: auth.username });
      } else callback(new Error('Invalid username or password'));
    },
    onData(stream, _session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const raw = Buffer.concat(chunks).toString('utf8');
        simpleParser(raw).then(
          (m) => {
            const address = (a: typeof m.from) =>
              (Array.isArray(a) ? a : a ? [a] : []).flatMap((x) => x.value.map((v: { address?: string }) => v.address ?? '')).join(',');
            received.push({
              from: address(m.from),
              to: address(m.to as typeof m.from),
              subject: m.subject ?? '',
              text: m.text ?? '',
              html: typeof m.html === 'string' ? m.html : '',
              raw,
            });
            callback();
          },
          (e: Error) => callback(e),
        );
      });
    },
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => resolve());
  });
  return { received, logins, stop: () => new Promise((resolve) => server.close(() => resolve())) };
}
