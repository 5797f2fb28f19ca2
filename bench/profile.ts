import fs from 'node:fs';

/**
 * Summarises a V8 `.cpuprofile` (from `pmlake bench --profile DIR`, which runs the server with --cpu-prof):
 * self time per function and per file, top N. usage: node --import tsx bench/profile.ts FILE [N]
 */
type Node = { id: number; callFrame: { functionName: string; url: string; lineNumber: number }; hitCount?: number; children?: number[] };
type Profile = { nodes: Node[]; samples?: number[]; timeDeltas?: number[]; startTime: number; endTime: number };

export function summarize(p: Profile, top = 25): string {
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const self = new Map<number, number>();
  const samples = p.samples ?? [];
  const deltas = p.timeDeltas ?? [];
  for (let i = 0; i < samples.length; i++) self.set(samples[i]!, (self.get(samples[i]!) ?? 0) + (deltas[i] ?? 0));
  const total = [...self.values()].reduce((a, b) => a + b, 0) || 1;
  const fn = new Map<string, number>();
  const file = new Map<string, number>();
  for (const [id, us] of self) {
    const n = byId.get(id)!;
    const url = n.callFrame.url
      .replace(/^file:\/\//, '')
      .replace(/.*node_modules\//, 'nm/')
      .replace(/.*\/work\/main\//, '');
    const name = `${n.callFrame.functionName || '(anonymous)'} ${url}:${n.callFrame.lineNumber + 1}`;
    fn.set(name, (fn.get(name) ?? 0) + us);
    const f = url
      ? url
          .split('/')
          .slice(0, url.startsWith('nm/') ? (url.startsWith('nm/@') ? 3 : 2) : 99)
          .join('/')
      : n.callFrame.functionName;
    file.set(f, (file.get(f) ?? 0) + us);
  }
  const fmt = (m: Map<string, number>): string =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, top)
      .map(([k, us]) => `${((100 * us) / total).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(7)} ms  ${k}`)
      .join('\n');
  return `total sampled ${(total / 1e6).toFixed(2)} s\n\nby function (self):\n${fmt(fn)}\n\nby file / package (self):\n${fmt(file)}\n`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const f = process.argv[2];
  if (!f) {
    process.stderr.write('usage: bench/profile.ts FILE.cpuprofile [N]\n');
    process.exit(2);
  }
  process.stdout.write(summarize(JSON.parse(fs.readFileSync(f, 'utf8')) as Profile, Number(process.argv[3] ?? 25)));
}
