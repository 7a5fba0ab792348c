// ACL label strings: parsing, the canonical stored form. The access rule over them is in visibility.ts.

const LABEL = /^[a-z0-9][a-z0-9_.:-]{0,63}$/;

export type LabelSet = readonly string[];

export class LabelError extends Error {}

/** Parses an ACL label string ("eng, finance ops") or an array into the canonical set: unique and sorted. */
export function parseLabels(input: string | readonly unknown[] | null | undefined): LabelSet {
  if (input === null || input === undefined) return [];
  const parts = typeof input === 'string' ? input.split(/[\s,]+/).filter((p) => p !== '') : [...input];
  const out = new Set<string>();
  for (const part of parts) {
    if (typeof part !== 'string' || !LABEL.test(part)) {
      const shown = typeof part === 'string' ? JSON.stringify(part.length > 70 ? `${part.slice(0, 70)}…` : part) : String(part);
      throw new LabelError(`invalid label ${shown}: a label is 1 to 64 characters of a-z 0-9 _ . : - and starts with a letter or digit`);
    }
    out.add(part);
  }
  return [...out].sort();
}

/** The stored form: canonical labels joined by commas ('' for none). */
export function formatLabels(labels: LabelSet): string {
  return labels.join(',');
}

/** Reads a stored label column; it is canonical already, so no validation here. */
export function storedLabels(column: string): LabelSet {
  return column === '' ? [] : column.split(',');
}
