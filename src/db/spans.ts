// Database time in traces (CONTRACT §8): each statement a client span named by its operation (SELECT, INSERT, BEGIN),
// and each write transaction a span around its statements, both only within a request's trace (a background job's
// queries make none). Never a statement's values: only its first word.
import { inSpan, tracing } from '../trace/spans.ts';

const SYSTEM = { 'db.system.name': 'sqlite' } as const;

/** Runs one statement (synchronous on the embedded driver, a promise on a database server) in its span. */
export function statementSpan<T>(sql: string, run: () => T): T {
  if (!tracing()) return run();
  const operation = /^\s*([A-Za-z]+)/.exec(sql)?.[1]?.toUpperCase() ?? 'SQL';
  return inSpan(operation, { kind: 'client', childOnly: true, attributes: { ...SYSTEM, 'db.operation.name': operation } }, run);
}

/** Runs a write transaction (its wait for the lock included) in its span. */
export function transactionSpan<T>(run: () => Promise<T>): Promise<T> {
  if (!tracing()) return run();
  return inSpan('transaction', { kind: 'internal', childOnly: true, attributes: SYSTEM }, run);
}
