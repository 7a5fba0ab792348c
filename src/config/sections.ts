// svc.ini's top level: the [server], [notify] and [auth] sections, any number of [upstream NAME], and the lines in each.
import type { Lines } from './ini-section.ts';

const SECTION_NAMES = ['server', 'auth', 'notify'];

export function splitSections(text: string, problems: string[]): Map<string, Lines> {
  const sections = new Map<string, Lines>();
  let current: Lines | null = null;
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = i + 1;
    const header = /^\s*\[([^\]]*)\]\s*$/.exec(raw);
    if (header) {
      const name = header[1]!.trim().replace(/^upstream\s+/, 'upstream ');
      if (name === 'upstream') {
        problems.push(`[upstream]: name the upstream (line ${line}), such as [upstream tracker]`);
        current = [];
      } else if (!SECTION_NAMES.includes(name) && !name.startsWith('upstream ')) {
        problems.push(`${name}: unknown section (line ${line}); svc.ini has [server], [notify], [auth] and [upstream NAME]`);
        current = [];
      } else if (sections.has(name)) {
        problems.push(`${name}: section given twice (line ${line})`);
        current = [];
      } else {
        current = [];
        sections.set(name, current);
      }
      return;
    }
    const trimmed = raw.trim();
    if (current === null) {
      if (trimmed !== '' && !trimmed.startsWith('#') && !trimmed.startsWith(';')) {
        problems.push(`line ${line}: outside any section; start the file with [server]`);
      }
      return;
    }
    current.push({ text: raw, line });
  });
  return sections;
}
