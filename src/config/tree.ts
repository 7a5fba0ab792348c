// The indented `[auth]` tree of svc.ini: each line is `key` or `key<whitespace>value`, deeper indentation
// nests under the line above, `#` and `;` start comment lines.

export interface TreeNode {
  key: string;
  value: string;
  line: number;
  children: TreeNode[];
}

export interface TreeProblem {
  line: number;
  message: string;
}

interface Level {
  indent: string; // indentation shared by every node at this level
  nodes: TreeNode[];
}

export function parseTree(lines: readonly { text: string; line: number }[]): { roots: TreeNode[]; problems: TreeProblem[] } {
  const roots: TreeNode[] = [];
  const problems: TreeProblem[] = [];
  // levels[0] holds the roots; levels[i + 1] holds the children of the last node of levels[i].
  const levels: Level[] = [];

  for (const { text, line } of lines) {
    const trimmed = text.trim();
    if (trimmed === '' || trimmed.startsWith('#') || trimmed.startsWith(';')) continue;
    const indent = /^[ \t]*/.exec(text)![0];

    // Close deeper levels until one is at or above this line's indentation.
    while (levels.length > 0 && indent.length < levels[levels.length - 1]!.indent.length) levels.pop();
    let level = levels[levels.length - 1];
    if (level === undefined) {
      level = { indent, nodes: roots };
      levels.push(level);
    } else if (indent.length > level.indent.length) {
      const parent = level.nodes[level.nodes.length - 1];
      if (parent === undefined || !indent.startsWith(level.indent)) {
        problems.push({ line, message: 'indentation mixes tabs and spaces differently from the line above' });
        continue;
      }
      if (parent.children.length > 0) {
        // Between two levels seen before: neither a sibling of those children nor a sibling of their parent.
        problems.push({ line, message: 'indentation does not match the lines at the same level' });
        continue;
      }
      level = { indent, nodes: parent.children };
      levels.push(level);
    } else if (indent !== level.indent) {
      problems.push({ line, message: 'indentation does not match the lines at the same level' });
      continue;
    }
    const m = /^(\S+)(?:\s+(.*))?$/.exec(trimmed)!;
    level.nodes.push({ key: m[1]!, value: (m[2] ?? '').trim(), line, children: [] });
  }
  return { roots, problems };
}
