import type { SourceHandler } from '../types.js';

/** Chain files of `pmlake chain` (docs/chain-format.md): the first line names the format. */
export const chainFilesHandler: SourceHandler = {
  kind: 'fills',
  name: 'chain files (pmlake chain)',
  detect: (_file, head) => /^\{"kind":"chain_range"/.test(head.trimStart()),
  stage() {
    return Promise.reject(new Error('chain files: not landed yet'));
  },
};
