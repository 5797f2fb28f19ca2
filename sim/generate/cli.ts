import { z } from 'zod';
import { generate } from './index.js';
import { hasFaults, type FaultOptions } from './faults.js';

/**
 * `pmlake generate --markets N --days D --seed S --out DIR [--start YYYY-MM-DD] [--busy K] [--options]
 *  [--rate X] [--maker-fills F] [--workers W] [--drop-rate P] [--silence ISO+SECONDS[,…]] [--duplicates N] [--crossed N]`
 *  — writes synthetic venue-format source files (see lake/README.md "Generator"); the last four inject capture
 *  faults into the websocket tape and write their truth to <out>/faults.json (sim/generate/faults.ts).
 */
const USAGE =
  'usage: pmlake generate --markets N --days D --seed S --out DIR [--start YYYY-MM-DD] [--busy K] [--options] [--rate X] [--maker-fills F] [--workers W]\n' +
  '       [--drop-rate P] [--silence 2025-09-14T12:00:00Z+600[,…]] [--duplicates N] [--crossed N]\n';

/** One capture silence: an ISO instant (UTC) and a length in seconds, e.g. 2025-09-14T12:00:00Z+600. */
const Silence = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?Z\+\d{1,6}$/, 'expected <ISO instant>Z+<seconds>, e.g. 2025-09-14T12:00:00Z+600')
  .transform((s) => {
    const at = s.lastIndexOf('+');
    const iso = s.slice(0, at);
    const fromMs = Date.parse(iso);
    // Date.parse rolls 2025-02-31 over into March: the day must read back as written.
    return {
      fromMs: Number.isNaN(fromMs) || new Date(fromMs).toISOString().slice(0, 10) !== iso.slice(0, 10) ? NaN : fromMs,
      seconds: Number(s.slice(at + 1)),
    };
  })
  .refine((x) => !Number.isNaN(x.fromMs) && x.seconds >= 1, 'not a valid instant or a length under 1 s');

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
  'drop-rate': z.coerce.number().min(0).max(0.5).optional(),
  silence: z
    .string()
    .transform((s) => s.split(','))
    .pipe(z.array(Silence).max(100))
    .optional(),
  duplicates: z.coerce.number().int().min(0).max(10_000).optional(),
  crossed: z.coerce.number().int().min(0).max(10_000).optional(),
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
  const { 'maker-fills': makerFills, 'drop-rate': dropRate, silence, duplicates, crossed, ...rest } = opts;
  const faults: FaultOptions = { dropRate: dropRate ?? 0, silences: silence ?? [], duplicates: duplicates ?? 0, crossed: crossed ?? 0 };
  const gen = { ...rest, ...(makerFills !== undefined ? { makerFills } : {}), ...(hasFaults(faults) ? { faults } : {}) };
  const report = await generate(gen, (r, done, total) => {
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
      ...(report.faults ? { faults: report.faults } : {}),
      bytes: bytes.total,
      ...timing,
    })}\n`,
  );
  return 0;
}
