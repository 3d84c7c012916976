/** What a V8 heap snapshot holds, by constructor and by holder: the heap tools' (fleet-heap.ts, voice-heap.ts) reading of it. */
import { readFileSync } from 'node:fs';

interface Snapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]]; edge_fields: string[]; edge_types: [string[], ...unknown[]] } };
  nodes: number[];
  edges: number[];
  strings: string[];
}
export type Tally = Map<string, { size: number; count: number }>;

function add(t: Tally, key: string, size: number): void {
  const e = t.get(key) ?? { size: 0, count: 0 };
  e.size += size;
  e.count++;
  t.set(key, e);
}

/**
 * Self size and count by "type:name" (closures by their function name, strings and arrays by type), and
 * the same by what holds each node: "owner's key ← edge name", the owner named by its own key.
 */
export function byConstructor(file: string): { own: Tally; held: Tally } {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snapshot;
  const f = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const [iType, iName, iSize, iEdges, width] = [f.indexOf('type'), f.indexOf('name'), f.indexOf('self_size'), f.indexOf('edge_count'), f.length];
  const ef = s.snapshot.meta.edge_fields;
  const etypes = s.snapshot.meta.edge_types[0];
  const [eType, eName, eTo, ewidth] = [ef.indexOf('type'), ef.indexOf('name_or_index'), ef.indexOf('to_node'), ef.length];
  const keyOf = (i: number) => {
    const type = types[s.nodes[i + iType]!]!;
    const plain = type === 'string' || type === 'concatenated string' || type === 'sliced string' || type === 'number';
    const name = plain ? '' : s.strings[s.nodes[i + iName]!]!;
    return `${type}:${name.length > 50 ? name.slice(0, 50) : name}`;
  };
  const own: Tally = new Map();
  const holder = new Map<number, string>();
  for (let i = 0, e = 0; i < s.nodes.length; i += width) {
    const key = keyOf(i);
    add(own, key, s.nodes[i + iSize]!);
    for (let k = 0; k < s.nodes[i + iEdges]!; k++, e += ewidth) {
      const et = etypes[s.edges[e + eType]!]!;
      if (et === 'weak' || et === 'shortcut') continue;
      const to = s.edges[e + eTo]!;
      if (holder.has(to)) continue;
      const n = s.edges[e + eName]!;
      const edge = et === 'element' || et === 'hidden' ? `[${et}]` : s.strings[n]!;
      holder.set(to, `${key} ← ${edge.length > 40 ? edge.slice(0, 40) : edge}`);
    }
  }
  const held: Tally = new Map();
  for (let i = 0; i < s.nodes.length; i += width) add(held, `${keyOf(i)}  held by  ${holder.get(i) ?? '-'}`, s.nodes[i + iSize]!);
  return { own, held };
}

/** The difference between two snapshots per unit (`n` devices or sessions): the top `top` by self size, then by holder. */
export function printHeapDiff(before: { own: Tally; held: Tally }, after: { own: Tally; held: Tally }, n: number, top: number, unit: string): void {
  const diff = (x: Tally, y: Tally) => {
    const rows = [...y].map(([k, v]) => {
      const o = x.get(k) ?? { size: 0, count: 0 };
      return { k, size: (v.size - o.size) / n, count: (v.count - o.count) / n };
    });
    return rows.sort((p, q) => q.size - p.size);
  };
  const own = diff(before.own, after.own);
  const total = own.reduce((sum, r) => sum + r.size, 0);
  const print = (rows: Array<{ k: string; size: number; count: number }>) => {
    for (const r of rows.slice(0, top)) process.stdout.write(`${r.size.toFixed(0).padStart(8)} B ${r.count.toFixed(2).padStart(7)}×  ${r.k}\n`);
  };
  process.stdout.write(`  snapshot self size ${total.toFixed(0)} B per ${unit}; top ${top} by bytes per ${unit}:\n`);
  print(own);
  process.stdout.write(`\nthe same by holder (owner's constructor ← property):\n`);
  print(diff(before.held, after.held));
}
