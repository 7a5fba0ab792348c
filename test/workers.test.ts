// svc serve --workers N from source; binary.test.ts runs the same on the executable.
import { test } from 'node:test';
import { sourceRunner } from './helpers/installation.ts';
import { twoWorkers } from './helpers/workers.ts';

test('serve --workers 2: shared socket and database, a dead worker replaced, SIGTERM ends all', (t) => twoWorkers(sourceRunner, t));
