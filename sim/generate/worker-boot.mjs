// Worker threads start without the TypeScript loader that the CLI (tsx) or vitest runs under: register
// tsx's ESM hooks in this thread, then load the real worker module.
import { register } from 'tsx/esm/api';

register();
await import('./worker.ts');
