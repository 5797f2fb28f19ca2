import crypto from 'node:crypto';
import type { Writable } from 'node:stream';
import type { UsageTicket } from '../accounts/meter.js';
import type { Principal } from '../accounts/principal.js';
import type { LiveStream, StreamRegistry } from '../accounts/streams.js';
import { GateClosed, type CopyStream } from '../lake/stream.js';
import { planDownload, type DownloadPlan, type PlanDeps } from './plan.js';
import { preflight, type Delivery, type SendDeps } from './send.js';
import type { PullSpec } from './spec.js';
import { ZipWriter } from './zip.js';
import { pullCoverage, worstOf, type PullCoverage } from './coverage.js';

/**
 * A bulk download: 1–25 line items, each one file pull, streamed as one ZIP — a file per item plus
 * manifest.json {item, file, rows, bytes, sha256, status, coverage}. Items run one after the other, each a DuckDB COPY
 * into its ZIP entry, so memory stays flat however large the bundle. Entries are stored, not deflated: Parquet
 * is already compressed, and deflating CSV on a 2-core box would halve throughput.
 *
 * Every item is planned (validated, resolved) and metered before the first byte, so an invalid item or a
 * refused pull fails the whole bundle with a typed error and nothing is charged. An item with no rows in its
 * window becomes `<file>.EMPTY.txt`, status "empty", and does not fail the bundle.
 *
 * The ZIP is written by ./zip.ts straight into the output (native CRC-32, one write per FIFO chunk). The
 * manifest's sha256 is a checksum a client can verify per file after unzipping; it is computed by OpenSSL as
 * the bytes pass, so it costs no second read.
 */

/** One line item: the pull, and the request as the caller sent it (echoed in the manifest). */
export type BulkItem = { spec: PullSpec; echo: Readonly<Record<string, unknown>> };

type ManifestItem = {
  item: number;
  kind: string;
  file: string;
  format: string;
  status: 'ok' | 'empty';
  rows: number;
  bytes: number;
  sha256: string;
  cost: number;
  request: Record<string, unknown>;
  /** The tape's coverage of the item's days (./coverage.ts); null for trades, OHLCV and options. */
  coverage: PullCoverage | null;
};

/**
 * `streams`: the bundle is one of the user's streams (src/accounts/streams.ts): each chunk taken from their
 * fair use before it goes, reserved on the ticket of the item being written; cut (the output destroyed) when
 * none is left or the key, account or plan no longer allows it.
 */
export type BulkDeps = PlanDeps & SendDeps & { streams?: StreamRegistry };

/**
 * `out`'s 'close' before it finished means the consumer went away. `begin` is called once every item is
 * planned and metered, before the first byte: the caller's moment for headers.
 */
export type BulkTarget = { out: Writable; begin(): void; delivery?: () => Delivery };

/**
 * `error`: the bundle failed after `begin` (not because the consumer left); every item was refunded and the
 * COPY stopped. The output is left to the caller: if nothing was written yet it can still answer an error.
 */
export type BulkResult = { rows: number; bytes: number; complete: boolean; error?: unknown };

export async function sendBulk(deps: BulkDeps, principal: Principal, items: readonly BulkItem[], target: BulkTarget): Promise<BulkResult> {
  const plans: DownloadPlan[] = [];
  for (const [i, it] of items.entries()) plans.push(await planDownload(deps, principal, it.spec, i));
  const live = deps.streams?.admit(principal, [...new Set(plans.map((p) => p.dataset))]);
  try {
    return await sendPlanned(deps, principal, items, plans, target, live);
  } finally {
    live?.close();
  }
}

async function sendPlanned(
  deps: BulkDeps,
  principal: Principal,
  items: readonly BulkItem[],
  plans: readonly DownloadPlan[],
  target: BulkTarget,
  live: LiveStream | undefined,
): Promise<BulkResult> {
  const tickets: UsageTicket[] = [];
  try {
    for (const p of plans) {
      tickets.push(
        await deps.meter.begin(principal, {
          kind: 'download',
          dataset: p.dataset,
          description: `bulk: ${p.description}`,
          estimatedBytes: 0,
          format: p.format,
          marketId: p.marketId,
          fileName: p.fileName,
          timeframe: p.timeframe,
          start: p.start,
          end: p.end,
        }),
      );
    }
  } catch (err) {
    for (const t of tickets) await t.refund('bulk refused');
    throw err;
  }

  const { out } = target;
  const zip = new ZipWriter(out, live ? (n) => live.take(n) : undefined);
  let current: CopyStream | null = null;
  const onStop = (): void => current?.cancel('stream stopped');
  live?.signal.addEventListener('abort', onStop, { once: true });
  let clientGone = false;
  const onClose = (): void => {
    if (!out.writableFinished) {
      clientGone = true;
      // Interrupts DuckDB; the ZIP writer, waiting on the COPY's stream or on a drain, then fails too.
      current?.cancel('client disconnected');
    }
  };
  out.once('close', onClose);
  target.begin();
  const delivery = target.delivery?.();

  const manifest: ManifestItem[] = [];
  try {
    for (const [i, p] of plans.entries()) {
      const name = `${String(i + 1).padStart(2, '0')}_${p.fileName}`;
      // The item's bytes are reserved on its own ticket, so each record settles what it reserved.
      live?.bind(tickets[i]!);
      const copy = await deps.lake.copy(p.query, p.format);
      current = copy;
      const head = await preflight(copy.stream);
      const request = { ...items[i]!.echo, start: p.start, end: p.end, timeframe: p.timeframe ?? null };
      if (head.ended) {
        const r = await copy.done;
        if (r.rows === 0) {
          const text = `No rows for item ${i + 1} (${p.description}) in the requested range.\n`;
          await zip.addBuffer(`${name}.EMPTY.txt`, text);
          manifest.push({
            item: i,
            kind: p.dataset,
            file: `${name}.EMPTY.txt`,
            format: p.format,
            status: 'empty',
            rows: 0,
            bytes: 0,
            sha256: crypto.createHash('sha256').update(text).digest('hex'),
            cost: 0,
            request,
            coverage: null,
          });
          continue;
        }
      }
      const hash = crypto.createHash('sha256');
      const entry = await zip.addStream(name, copy, head.chunks, !head.ended, (b) => {
        hash.update(b);
        delivery?.wrote(zip.bytesWritten);
      });
      const r = await copy.done;
      manifest.push({
        item: i,
        kind: p.dataset,
        file: name,
        format: p.format,
        status: 'ok',
        rows: r.rows,
        bytes: entry.bytes,
        sha256: hash.digest('hex'),
        cost: 0,
        request,
        coverage: null,
      });
    }
    current = null;
    // Read after the items, in the same lake version: a batch job can refuse the days it cannot trust.
    for (const [i, p] of plans.entries()) if (p.coverage) manifest[i]!.coverage = await pullCoverage(deps.lake, p.coverage.scope, p.coverage.window);
    const totals = manifest.reduce((a, m) => ({ rows: a.rows + m.rows, bytes: a.bytes + m.bytes }), { rows: 0, bytes: 0 });
    await zip.addBuffer(
      'manifest.json',
      JSON.stringify(
        {
          created_at: new Date().toISOString(),
          items: manifest,
          total_rows: totals.rows,
          total_bytes: totals.bytes,
          total_cost: 0,
          pricing_model: 'subscription',
          coverage_worst: worstOf(manifest.map((m) => m.coverage?.worst ?? null)),
        },
        null,
        2,
      ),
    );
    await zip.finish();
    if (clientGone) throw new Error('client disconnected');
  } catch (err) {
    out.off('close', onClose);
    live?.signal.removeEventListener('abort', onStop);
    current?.cancel('bulk failed');
    const written = zip.bytesWritten;
    const cut = err instanceof GateClosed || live?.stopped;
    if (clientGone || cut) {
      // A bundle cut short ends without its central directory; a client that left pays what reached it.
      if (cut) out.destroy();
      const sent = clientGone && delivery ? delivery.delivered(written) : written;
      delivery?.close();
      await settle(tickets, manifest, sent, true);
      return { rows: 0, bytes: sent, complete: false };
    }
    delivery?.close();
    for (const t of tickets) await t.refund('bulk download failed');
    return { rows: 0, bytes: written, complete: false, error: err };
  }
  const sent = zip.bytesWritten;
  out.off('close', onClose);
  live?.signal.removeEventListener('abort', onStop);
  delivery?.close();
  await settle(tickets, manifest, sent, false);
  return { rows: manifest.reduce((a, m) => a + m.rows, 0), bytes: sent, complete: true };
}

/**
 * One history record per item with its rows and file bytes; the ZIP's own framing (local headers, central
 * directory, manifest) is added to the last served item, so the recorded bytes sum to the bytes sent.
 * Empty items are refunded. A client that left mid-bundle is charged for what it received.
 */
async function settle(tickets: UsageTicket[], manifest: ManifestItem[], sent: number, partial: boolean): Promise<void> {
  // Bytes leave in item order. The last charged item is the one in flight when the client left, or else the
  // last item that had rows; it takes whatever remains, so the records add up to the bytes sent.
  const inFlight = partial && manifest.length < tickets.length ? manifest.length : -1;
  let lastCharged = inFlight;
  if (lastCharged === -1) manifest.forEach((m, i) => (m.status === 'ok' ? (lastCharged = i) : undefined));
  let remaining = sent;
  for (const [i, t] of tickets.entries()) {
    const m = manifest[i];
    if ((m && m.status === 'ok') || i === inFlight) {
      const bytes = i === lastCharged ? remaining : Math.min(m?.bytes ?? 0, remaining);
      remaining -= bytes;
      await t.commit({ bytes, rows: m?.rows ?? 0 });
    } else {
      await t.refund(m ? 'empty item' : 'bundle ended before this item');
    }
  }
}
