import { z } from 'zod';
import { generate } from './index.js';

/**
 * `pmlake generate --markets N --days D --seed S --out DIR [--start YYYY-MM-DD] [--busy K] [--options]
 *  [--rate X] [--maker-fills F] [--workers W]` — writes synthetic venue-format source files (see lake/README.md "Generator").
 */
const USAGE =
  'usage: pmlake generate --markets N --days D --seed S --out DIR [--start YYYY-MM-DD] [--busy K] [--options] [--rate X] [--maker-fills F] [--workers W]\n';

const Args = z.object({
  markets: z.coerce.number().int().min(1).max(100_000),
  days: z.coerce.number().int().min(1).max(3_650),
  seed: z.coerce
    .number()
    .int()
    .min(0)
    .max(2 ** 53 - 1),
  out: z.string().min(1),
  start: z
    .string()
    .regex(/^\d{4}-\d{2}-\d{2}$/)
    .refine((s) => !Number.isNaN(Date.parse(`${s}T00:00:00Z`)), 'not a date')
    .optional(),
  busy: z.coerce.number().int().min(0).max(1_000).optional(),
  options: z.boolean().optional(),
  rate: z.coerce.number().positive().max(1_000).optional(),
  'maker-fills': z.coerce.number().min(1).max(50).optional(),
  workers: z.coerce.number().int().min(0).max(64).optional(),
});

export function parseGenerateArgs(args: string[]): z.infer<typeof Args> {
  const raw: Record<string, string | boolean> = {};
  for (let i = 0; i < args.length; i++) {
    const a = args[i]!;
    if (!a.startsWith('--')) throw new Error(`unexpected argument: ${a}`);
    const key = a.slice(2);
    if (key === 'options') {
      raw.options = true;
      continue;
    }
    const v = args[i + 1];
    if (v === undefined || v.startsWith('--')) throw new Error(`--${key} needs a value`);
    raw[key] = v;
    i++;
  }
  const parsed = Args.strict().safeParse(raw);
  if (!parsed.success) {
    throw new Error(parsed.error.issues.map((i) => `--${i.path.join('.') || '?'}: ${i.message}`).join('; '));
  }
  return parsed.data;
}

export async function generateCommand(args: string[]): Promise<number> {
  let opts: z.infer<typeof Args>;
  try {
    opts = parseGenerateArgs(args);
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  const t0 = Date.now();
  const { 'maker-fills': makerFills, ...rest } = opts;
  const report = await generate({ ...rest, ...(makerFills !== undefined ? { makerFills } : {}) }, (r, done, total) => {
    const s = (Date.now() - t0) / 1000;
    process.stderr.write(`generate: day ${done}/${total} ${r.date} ${r.counts.level_updates} level updates, ${r.counts.trades} trades (${s.toFixed(1)} s)\n`);
  });
  const { counts, bytes, timing } = report;
  process.stdout.write(
    `${JSON.stringify({
      out: report.out,
      markets: counts.markets,
      tokens: counts.tokens,
      ws_messages: counts.ws_messages,
      level_updates: counts.level_updates,
      trades: counts.trades,
      fill_events: counts.fill_events,
      options_trades: counts.options_trades,
      bytes: bytes.total,
      ...timing,
    })}\n`,
  );
  return 0;
}
