import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { AtomicFile, type FileSink, type FileStep } from '../../src/atomic-file.js';

const dirs: string[] = [];
afterEach(async () => {
  for (const d of dirs.splice(0)) await fs.promises.rm(d, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const d = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'atomic-file-'));
  dirs.push(d);
  return d;
}

async function openIn(dir: string, name = '.open-x.jsonl'): Promise<AtomicFile> {
  return new AtomicFile(await fs.promises.open(path.join(dir, name), 'wx'), dir, name);
}

describe('AtomicFile', () => {
  it('is not under its closed name before close; complete under it after, the open name gone', async () => {
    const dir = await tempDir();
    const file = await openIn(dir);
    const lines = Array.from({ length: 1000 }, (_, i) => `{"n":${i}}\n`);
    for (const l of lines) await file.write(Buffer.from(l));
    expect(fs.existsSync(path.join(dir, 'x.jsonl'))).toBe(false);
    expect(await fs.promises.readdir(dir)).toEqual(['.open-x.jsonl']);

    const closed = await file.close('x.jsonl');
    expect(closed).toBe(path.join(dir, 'x.jsonl'));
    expect(await fs.promises.readFile(closed, 'utf8')).toBe(lines.join(''));
    expect(await fs.promises.readdir(dir)).toEqual(['x.jsonl']);
    expect(fs.existsSync(file.openPath)).toBe(false);
  });

  it('writes at a position over what is there (a header rewritten in place)', async () => {
    const dir = await tempDir();
    const file = await openIn(dir);
    await file.write(Buffer.from('aaaa\nbbbb\n'));
    await file.write(Buffer.from('AA'), 0);
    await file.write(Buffer.from('cc\n'));
    await file.close('x.jsonl');
    expect(await fs.promises.readFile(path.join(dir, 'x.jsonl'), 'utf8')).toBe('AAaa\nbbbb\ncc\n');
  });

  it('resumes a partial write where it stopped, and runs each step through the writer’s runner', async () => {
    const dir = await tempDir();
    const fh = await fs.promises.open(path.join(dir, '.open-x.jsonl'), 'wx');
    // A disk that takes at most 3 bytes a write, and fails the first fsync.
    let failSync = true;
    const sink: FileSink = {
      write: ((buf: Buffer, offset: number, length: number) => fh.write(buf, offset, Math.min(3, length))) as FileSink['write'],
      sync: () => (failSync ? ((failSync = false), Promise.reject(new Error('EIO'))) : fh.sync()),
      close: () => fh.close(),
    };
    const steps: FileStep[] = [];
    const retrying = async <T>(step: FileStep, fn: () => Promise<T>): Promise<T> => {
      for (;;) {
        steps.push(step);
        try {
          return await fn();
        } catch {
          // again
        }
      }
    };
    const file = new AtomicFile(sink, dir, '.open-x.jsonl', retrying);
    await file.write(Buffer.from('0123456789\n'));
    await file.close('x.jsonl');
    expect(await fs.promises.readFile(path.join(dir, 'x.jsonl'), 'utf8')).toBe('0123456789\n');
    expect(steps).toEqual(['write', 'write', 'write', 'write', 'fsync', 'fsync', 'rename', 'fsync dir']);
  });

  it('reports a failed close and puts the file into place all the same when asked; throws it otherwise', async () => {
    const dir = await tempDir();
    const fh = await fs.promises.open(path.join(dir, '.open-x.jsonl'), 'wx');
    const failing: FileSink = {
      write: fh.write.bind(fh) as FileSink['write'],
      sync: () => fh.sync(),
      close: () => fh.close().then(() => Promise.reject(new Error('EIO'))),
    };
    const reported: unknown[] = [];
    await new AtomicFile(failing, dir, '.open-x.jsonl').close('x.jsonl', (err) => reported.push(err));
    expect(reported).toHaveLength(1);
    expect(await fs.promises.readdir(dir)).toEqual(['x.jsonl']);

    const fh2 = await fs.promises.open(path.join(dir, '.open-y.jsonl'), 'wx');
    const failing2: FileSink = { ...failing, sync: () => fh2.sync(), close: () => fh2.close().then(() => Promise.reject(new Error('EIO'))) };
    await expect(new AtomicFile(failing2, dir, '.open-y.jsonl').close('y.jsonl')).rejects.toThrow('EIO');
    expect(fs.existsSync(path.join(dir, 'y.jsonl'))).toBe(false);
  });

  it('discard removes the open file and leaves no closed one', async () => {
    const dir = await tempDir();
    const file = await openIn(dir);
    await file.write(Buffer.from('half a li'));
    await file.discard();
    expect(await fs.promises.readdir(dir)).toEqual([]);
  });
});
