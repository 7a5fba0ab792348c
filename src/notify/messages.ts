// The mails: plain text and simple HTML, naming the token or app and linking to the token page. They never carry a
// secret. Names come from users and from self-registered OAuth clients, so they are quoted, stripped of control
// characters, shortened, and escaped in HTML.
import type { ClaimedNotice } from '../store/notices.ts';

export interface Mail {
  readonly subject: string;
  readonly text: string;
  readonly html: string;
}

function clean(value: unknown, max = 80): string {
  const text = typeof value === 'string' ? value : '';
  // eslint-disable-next-line no-control-regex
  const plain = text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, ' ').trim();
  return plain.length > max ? `${plain.slice(0, max - 1)}…` : plain;
}

const escapeHtml = (s: string) =>
  s.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);

function when(value: unknown): string {
  const ms = typeof value === 'number' ? value : typeof value === 'string' ? Date.parse(value) : NaN;
  return Number.isFinite(ms) ? `${new Date(ms).toISOString().slice(0, 16).replace('T', ' ')} UTC` : 'never';
}

export function composeMail(notice: ClaimedNotice, baseUrl: string): Mail {
  const page = `${baseUrl}/`;
  const greeting = `Hello ${clean(notice.user.name) || notice.user.uid},`;
  const d = notice.detail;
  let subject: string;
  let lines: string[];
  switch (notice.kind) {
    case 'token_expiring':
      subject = `Your svc token "${clean(d.name, 40)}" expires on ${when(d.expires_at)}`;
      lines = [
        `your personal access token "${clean(d.name)}" expires on ${when(d.expires_at)}. After that, svc refuses every request made with it.`,
        'To keep access, create a new token on your token page and put it where the old one is used.',
      ];
      break;
    case 'token_created':
      subject = `A token was created for your svc account: "${clean(d.name, 40)}"`;
      lines = [
        `an administrator created the personal access token "${clean(d.name)}" for your account (expires: ${when(d.expires_at)}). It acts as you, and it was shown once to whoever made it.`,
        'If you did not expect this, revoke it on your token page and tell your administrator.',
      ];
      break;
    case 'grant_made':
      subject = `You allowed "${clean(d.client, 40) || 'an app'}" to use svc as you`;
      lines = [
        `you allowed the app "${clean(d.client) || '(unnamed)'}" (client id ${clean(d.client_id, 120)}, returning to ${clean(d.redirect_uri, 200)}) to read svc documents as you.`,
        'If that was not you, revoke its access on your token page.',
      ];
      break;
    case 'password_changed':
      subject = d.change === 'removed' ? 'Your svc password was removed' : 'Your svc password was changed';
      lines = [
        `your svc password was ${d.change === 'removed' ? 'removed' : 'changed'} by ${d.by === 'you' ? 'you' : 'an administrator'}. Your other browser sessions were signed out.`,
        'If you did not expect this, tell your administrator.',
      ];
      break;
  }
  const footer = 'svc never sends a token or a password by mail.';
  const text = [greeting, '', ...lines.flatMap((l) => [l, '']), `Your token page: ${page}`, '', `-- \n${footer}`, ''].join('\n');
  const html = [
    '<!doctype html><html><body style="font-family: sans-serif">',
    `<p>${escapeHtml(greeting)}</p>`,
    ...lines.map((l) => `<p>${escapeHtml(l)}</p>`),
    `<p><a href="${escapeHtml(page)}">Open your token page</a></p>`,
    `<p style="color: #666">${escapeHtml(footer)}</p>`,
    '</body></html>',
  ].join('\n');
  return { subject, text, html };
}
