import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli } from '../ingest/lakeutil.js';
import { tempDir } from '../helpers/server.js';

/**
 * `pmlake serve` on an address another process already listens on: one line naming the address, a non-zero
 * exit, and nothing of the service started (the state directory is not even created).
 */
describe('pmlake serve on a busy port', () => {
  let other: net.Server;
  let port: number;
  const tmp = tempDir('pmlake-busy-');

  beforeAll(async () => {
    other = net.createServer();
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    port = (other.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((r) => other.close(r));
    tmp.cleanup();
  });

  it('says the address is in use and exits non-zero, before it opens the state', async () => {
    const stateDir = path.join(tmp.dir, 'state');
    const run = await spawnCli(['serve'], {
      PORT: String(port),
      HOST: '127.0.0.1',
      PMLAKE_LAKE: path.join(tmp.dir, 'lake'),
      PMLAKE_STATE: stateDir,
      LOG_LEVEL: 'info',
    }).done;
    expect(run.code).not.toBe(0);
    expect(run.code).not.toBeNull();
    expect(run.stderr).toContain(`address 127.0.0.1:${port} is already in use`);
    expect(run.stderr).not.toMatch(/TypeError|Cannot destructure/);
    expect(run.stdout).not.toContain('listening on');
    expect(fs.existsSync(stateDir)).toBe(false);
  });
});
