import { parseArgs } from 'node:util';
import { z } from 'zod';
import { loadConfig } from '../config.js';
import { StateStore } from '../state/store.js';

const Args = z.object({
  email: z.string().email(),
  plan: z.enum(['professional', 'free']),
  name: z.string().min(1).max(100),
});

/** `keys create --email E --plan P --name N`: prints the new key on stdout and nothing else. */
export async function keysCommand(args: string[]): Promise<number> {
  const [sub, ...rest] = args;
  if (sub !== 'create') {
    process.stderr.write('usage: pmlake keys create --email E --plan professional|free --name N\n');
    return 2;
  }
  const { values } = parseArgs({
    args: rest,
    options: { email: { type: 'string' }, plan: { type: 'string' }, name: { type: 'string' } },
    strict: true,
  });
  const parsed = Args.safeParse(values);
  if (!parsed.success) {
    process.stderr.write(`${parsed.error.issues.map((i) => `--${i.path.join('.')}: ${i.message}`).join('\n')}\n`);
    return 2;
  }
  const config = loadConfig();
  // The service's own state: the shared PostgreSQL when PMLAKE_DATABASE_URL is set (every replica sees the key).
  const store = await StateStore.connect({ stateDir: config.stateDir, databaseUrl: config.databaseUrl, role: 'keys' });
  try {
    const user = await store.upsertUser(parsed.data.email, parsed.data.plan);
    const { plaintext } = await store.createApiKey({ userId: user.id, name: parsed.data.name, prefix: config.keyPrefix });
    process.stdout.write(`${plaintext}\n`);
  } finally {
    await store.close();
  }
  return 0;
}
