import type { SourceHandler } from '../types.js';

/** Catalogue poll files of `pmlake catalogue` (docs/catalogue-format.md): the first line names the format. */
export const cataloguePollHandler: SourceHandler = {
  kind: 'metadata',
  name: 'catalogue poll files (pmlake catalogue)',
  detect: (_file, head) => /^\{"kind":"catalogue_poll"/.test(head.trimStart()),
  stage() {
    return Promise.reject(new Error('catalogue poll files: not landed yet'));
  },
};
