// Programs from Debian that some tests run as real peers. A missing one fails those tests with what to install:
// a test that passes because its peer was absent would prove nothing.
import { accessSync, constants } from 'node:fs';

/** `path` when it is an executable file; otherwise an error naming the Debian package that provides it. */
export function requireProgram(path: string, debianPackage: string): string {
  try {
    accessSync(path, constants.X_OK);
  } catch {
    throw new Error(
      `${path} is missing or not executable; these tests need it: install the Debian package ${debianPackage} (apt-get install ${debianPackage})`,
    );
  }
  return path;
}
