// Every duration key of svc.ini is read through here, so each one reports a bad value in the same words.
import { parseDuration, DURATION_HINT } from '../domain/duration.ts';

/** Seconds, or null with a problem naming the key when `text` is not a duration. */
export function readDuration(path: string, text: string, problems: string[]): number | null {
  const seconds = parseDuration(text);
  if (seconds === null) problems.push(`${path}: "${text}" is not a duration; ${DURATION_HINT}`);
  return seconds;
}
