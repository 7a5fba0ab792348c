// CONTRACT §5 "Durability", from source: real processes, real locks (sqlite3), kill -9. binary.test.ts runs the
// same scenarios on the single executable.
import { test, describe } from 'node:test';
import { sourceRunner } from './helpers/installation.ts';
import { lockedDatabase, crashRounds, cliBesideServer } from './helpers/durability.ts';

describe('durability (from source)', () => {
  test('another process holds the write lock past the busy wait: 503 and no change; afterwards every 2xx is committed', (t) =>
    lockedDatabase(sourceRunner, t));
  test('20 rounds of kill -9 under concurrent writes lose nothing acknowledged', (t) => crashRounds(sourceRunner, t, 20));
  test('the CLI writes beside a server under 50 connections: only 2xx or 503, nothing lost', (t) => cliBesideServer(sourceRunner, t));
});
