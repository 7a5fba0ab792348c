// CPU budgets for servers that stand for machines of their own. On a machine with too few cores to give each svc
// instance a core, an instance capped at a share of a core (a cgroup's CPU quota) is a small machine: two of them
// can both run at their full budget on one core, so what two instances answer against one shows what the shared
// database lets a second machine add, not what two processes lose by taking turns on one core.
//
// Needs a writable cgroup CPU controller (root, or a delegated cgroup): version 1's `cpu` hierarchy or version 2's
// `cpu.max`. Without one the caller is told why, and measures without budgets.
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Budgets {
  /** Puts the process `pid` (all its threads) under a budget of its own. */
  place(pid: number): void;
  /** Removes the budgets (their processes must have exited). */
  remove(): void;
}

/** The scheduler's accounting period: short, so a process over its budget waits milliseconds, not a tenth of a second. */
const PERIOD_US = 10_000;

/** CPU budgets of `share` of a core each, or why there can be none here. */
export function cpuBudgets(share: number): Budgets | string {
  const quota = String(Math.round(PERIOD_US * share));
  const v1 = '/sys/fs/cgroup/cpu';
  const v2 = '/sys/fs/cgroup';
  let limit: (dir: string) => void;
  let root: string;
  if (existsSync(join(v1, 'cpu.cfs_quota_us'))) {
    root = v1;
    limit = (dir) => {
      writeFileSync(join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
      writeFileSync(join(dir, 'cpu.cfs_quota_us'), quota);
    };
  } else if (
    existsSync(join(v2, 'cgroup.controllers')) &&
    readFileSync(join(v2, 'cgroup.controllers'), 'utf8').split(/\s+/).includes('cpu')
  ) {
    root = v2;
    limit = (dir) => writeFileSync(join(dir, 'cpu.max'), `${quota} ${PERIOD_US}`);
  } else {
    return 'no cgroup CPU controller here';
  }
  const made: string[] = [];
  let groups = 0;
  const group = () => {
    const dir = join(root, `svc-bench-${process.pid}-${groups++}`);
    mkdirSync(dir);
    made.push(dir);
    limit(dir);
    return dir;
  };
  const remove = () => {
    for (const dir of made.splice(0)) {
      try {
        rmdirSync(dir);
      } catch {
        // a process still in it: the group goes when the machine restarts
      }
    }
  };
  try {
    group(); // whether budgets can be made and set here at all
    remove();
  } catch (e) {
    remove();
    return `cgroup CPU budgets cannot be set here (${(e as NodeJS.ErrnoException).code ?? String(e)})`;
  }
  return { place: (pid) => writeFileSync(join(group(), 'cgroup.procs'), String(pid)), remove };
}
