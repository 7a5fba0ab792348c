// The approved definitions /mcp offers, parsed once per approval and kept: a caller's tools/list (or prompts/list)
// reads the gates of the approved tools (no definition), and only the definitions of the tools it offers, each from
// this copy while its approval stands; one copy per kind. Each definition is checked once, as it is parsed, by the rule discovery applies to what an
// upstream lists (domain/definition-text.ts): one approved before svc held hidden characters, or larger than it now
// offers, is never offered.
import type { Tool } from '@modelcontextprotocol/client';
import type { Database } from '../db/open.ts';
import { definitionSize, heldReasons } from '../domain/definition-text.ts';
import { approvedDefinitions, type ToolDefinition, type ToolGate } from '../store/upstream-tools.ts';
import { uiOf } from './found.ts';

/**
 * An approved definition as offered: the tool (or prompt) under its merged name, without `_meta`, and the bytes it
 * adds to a listing; `ui`: the tool's approved `_meta.ui`, which a caller is offered only with its app (apps.ts).
 */
export interface OfferedTool {
  readonly tool: Tool;
  readonly bytes: number;
  readonly ui?: Record<string, unknown>;
}

/** One kept definition: the approval it belongs to, and the tool as offered (null: never offered, by the rule). */
interface Kept {
  readonly fingerprint: string;
  readonly offered: OfferedTool | null;
}

const keyOf = (t: Pick<ToolGate, 'upstream' | 'kind' | 'name'>) => `${t.kind}\n${t.upstream}\n${t.name}`;

export class OfferedDefinitions {
  private kept = new Map<string, Kept>();

  constructor(private readonly database: Database) {}

  /**
   * The offered form of each of these approved tools, by `mergedName`; a tool missing from the answer is not offered
   * (its definition breaks the rule, or its approval changed while it was read). Reads only the definitions not kept
   * for their current approval, one query per upstream.
   */
  async offered(gates: readonly ToolGate[], mergedName: (t: ToolGate) => string): Promise<Map<ToolGate, OfferedTool>> {
    const missing = new Map<string, ToolGate[]>();
    for (const g of gates) {
      if (this.kept.get(keyOf(g))?.fingerprint === g.approvedFingerprint) continue;
      const key = `${g.kind}\n${g.upstream}`;
      const list = missing.get(key) ?? [];
      list.push(g);
      missing.set(key, list);
    }
    for (const list of missing.values()) {
      const { upstream, kind } = list[0]!;
      const byName = new Map(list.map((g) => [g.name, g]));
      // 50 at a time: a database server answers a few megabytes at once, and an approved definition may be 64 KiB.
      for (let i = 0; i < list.length; i += 50) {
        const rows = await approvedDefinitions(
          this.database.db,
          upstream,
          list.slice(i, i + 50).map((g) => g.name),
          kind,
        );
        for (const r of rows) {
          if (r.approvedFingerprint === null || r.approvedDefinition === null) continue;
          const gate = byName.get(r.name)!;
          this.kept.set(keyOf(gate), {
            fingerprint: r.approvedFingerprint,
            offered: offeredForm(gate.name, mergedName(gate), r.approvedDefinition),
          });
        }
      }
    }
    const answer = new Map<ToolGate, OfferedTool>();
    for (const g of gates) {
      const kept = this.kept.get(keyOf(g));
      if (kept?.fingerprint === g.approvedFingerprint && kept.offered !== null) answer.set(g, kept.offered);
    }
    return answer;
  }

  /** Drops what is kept of tools no longer approved (called with every approved tool, now and then). */
  keepOnly(gates: readonly ToolGate[]): void {
    if (this.kept.size <= gates.length) return;
    const live = new Set(gates.map(keyOf));
    for (const key of this.kept.keys()) if (!live.has(key)) this.kept.delete(key);
  }
}

/**
 * The tool (or prompt) named `name` at its upstream as offered under `merged`, or null when its definition breaks the
 * rule. A prompt's definition has no schema: it is typed as a tool here, and only its fields are in it. A tool's
 * `_meta.ui` is kept apart, for the caller's listing to add with its app.
 */
function offeredForm(name: string, merged: string, stored: string): OfferedTool | null {
  const definition = JSON.parse(stored) as ToolDefinition & { _meta?: unknown };
  if (heldReasons({ ...definition, name }, definitionSize(definition)).length > 0) return null;
  const { _meta, ...offered } = definition;
  const tool = { ...offered, name: merged } as Tool;
  const ui = uiOf(_meta);
  return { tool, bytes: Buffer.byteLength(JSON.stringify(tool)), ...(ui === undefined ? {} : { ui }) };
}
