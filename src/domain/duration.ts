// Durations as svc.ini and the token API write them: a positive integer and one of s, m, h, d.

const UNIT_SECONDS = { s: 1, m: 60, h: 3600, d: 86400 } as const;
const DURATION = /^([1-9][0-9]{0,9})([smhd])$/;

/** Seconds, or null when the text is not a duration. */
export function parseDuration(text: string): number | null {
  const m = DURATION.exec(text.trim());
  if (!m) return null;
  return Number(m[1]) * UNIT_SECONDS[m[2] as keyof typeof UNIT_SECONDS];
}

export const DURATION_HINT = 'a duration is a positive whole number followed by s, m, h or d, such as 90d';
