import fs from 'node:fs';

/**
 * Opens, fsyncs and closes a directory, so a rename inside it survives a crash of the machine: how the recorder,
 * the catalogue poller and the chain indexer put a closed file into place (dot file, fsync, rename, this).
 */
export async function syncDir(dir: string): Promise<void> {
  const fh = await fs.promises.open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
