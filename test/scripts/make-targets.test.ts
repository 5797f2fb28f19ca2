import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

/**
 * What each make target installs, read from make's own dry run (`make -n`, nothing executed) with the npm stamp
 * treated as out of date (`-W package.json`, as on a fresh clone): `make demo` installs the npm packages and no
 * system package; `make test` also the Debian packages the tests need; `make cluster` and `make bench` only
 * redis-server and PostgreSQL.
 */
function dryRun(target: string): string[] {
  return execFileSync('make', ['-n', '-W', 'package.json', target], { encoding: 'utf8', env: { ...process.env, MAKEFLAGS: '' } })
    .split('\n')
    .filter(Boolean);
}

const SYSTEM = 'scripts/ensure-system-deps.sh';

describe('make targets install what they use', () => {
  it('demo: npm install, then the demo; no system packages', () => {
    const lines = dryRun('demo');
    expect(lines.some((l) => /\bnpm install\b/.test(l))).toBe(true);
    expect(lines.some((l) => l.includes('pmlake -- demo'))).toBe(true);
    expect(lines.filter((l) => l.includes(SYSTEM))).toEqual([]);
  });

  it('serve, ingest, generate and lint need no system packages either', () => {
    for (const t of ['serve', 'ingest', 'generate', 'lint'])
      expect(
        dryRun(t).filter((l) => l.includes(SYSTEM)),
        t,
      ).toEqual([]);
  });

  it('test: npm install and every system package the tests use (the script without arguments)', () => {
    const lines = dryRun('test');
    expect(lines.some((l) => /\bnpm install\b/.test(l))).toBe(true);
    const system = lines.filter((l) => l.includes(SYSTEM));
    expect(system).toHaveLength(1);
    expect(system[0]!.trim().endsWith(SYSTEM)).toBe(true);
    // Installed before the tests run.
    expect(lines.findIndex((l) => l.includes(SYSTEM))).toBeLessThan(lines.findIndex((l) => /\bnpm test\b/.test(l)));
  });

  it('cluster and bench: only redis-server and PostgreSQL, no browser', () => {
    for (const t of ['cluster', 'bench']) {
      const system = dryRun(t).filter((l) => l.includes(SYSTEM));
      expect(system, t).toHaveLength(1);
      expect(system[0]!.split(SYSTEM)[1]!.trim().split(/\s+/).sort(), t).toEqual(['postgresql', 'redis-server']);
    }
  });
});
