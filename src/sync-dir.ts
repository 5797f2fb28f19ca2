import fs from 'node:fs';

/**
 * Opens, fsyncs and closes a directory, so a rename or a removal inside it survives a crash of the machine: the last
 * step of putting a closed file into place (src/atomic-file.ts: dot file, fsync, rename, this).
 */
export async function syncDir(dir: string): Promise<void> {
  const fh = await fs.promises.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
