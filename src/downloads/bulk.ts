import crypto from 'node:crypto';
import type { Request, Response } from 'express';
import { z } from 'zod';
import type { UsageTicket } from '../accounts/meter.js';
import type { AppContext } from '../http/context.js';
import { checkWindow, isoDateTime, timeframeParam } from '../http/params.js';
import { startCopy, type CopyStream } from '../lake/stream.js';
import { planDownload, type DownloadPlan } from './plan.js';
import { contentDisposition, preflight } from './send.js';
import { ZipWriter } from './zip.js';

/**
 * POST /v1/download/bulk: 1–25 line items, each mirroring one GET /v1/download/* call, streamed as one ZIP —
 * a file per item plus manifest.json {item, file, rows, bytes, sha256, status}. Items run one after the other,
 * each a DuckDB COPY into its ZIP entry, so memory stays flat however large the bundle. Entries are stored,
 * not deflated: Parquet is already compressed, and deflating CSV on a 2-core box would halve throughput.
 *
 * Every item is planned (validated, resolved) and metered before the first byte, so an invalid item or a
 * refused pull fails the whole request with a proper status and nothing is charged. An item with no rows in
 * its window becomes `<file>.EMPTY.txt`, status "empty", and does not fail the bundle.
 *
 * The ZIP is written by ./zip.ts straight into the response (native CRC-32, one write per FIFO chunk). The
 * manifest's sha256 is the issue's requirement (a checksum a client can verify per file after unzipping); it
 * is computed by OpenSSL as the bytes pass, ≈1 GB/s with SHA-NI.
 */

const BulkItem = z
  .object({
    kind: z.enum(['trades', 'ohlcv', 'orderbook', 'top_of_book', 'options', 'series', 'raw']),
    market_id: z.string().min(1).max(200).nullish(),
    series_id: z.string().min(1).max(128).nullish(),
    data_type: z.string().min(1).max(64).nullish(),
    timeframe: timeframeParam.nullish(),
    instrument_prefix: z.string().min(1).max(64).nullish(),
    shape: z.enum(['raw', 'normalized']).default('raw'),
    start: isoDateTime.nullish(),
    end: isoDateTime.nullish(),
    format: z.enum(['csv', 'parquet', 'json']).default('csv'),
    limit: z.number().int().min(1).max(2_000_000).default(100_000),
  })
  .transform((v) => ({ ...v, start: v.start ?? undefined, end: v.end ?? undefined }))
  .superRefine((v, ctx) => checkWindow(v, ctx));

export const BulkBody = z.object({ items: z.array(BulkItem).min(1).max(25) });
type Body = z.infer<typeof BulkBody>;

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
};

export async function sendBulk(req: Request, res: Response, ctx: AppContext, body: Body): Promise<void> {
  const plans: DownloadPlan[] = [];
  for (const [i, it] of body.items.entries()) {
    plans.push(
      await planDownload(
        ctx,
        req.principal,
        {
          kind: it.kind,
          market_id: it.market_id ?? undefined,
          series_id: it.series_id ?? undefined,
          data_type: it.data_type ?? undefined,
          timeframe: it.timeframe ?? undefined,
          instrument_prefix: it.instrument_prefix ?? undefined,
          shape: it.shape,
          start: it.start,
          end: it.end,
          format: it.format,
          limit: it.limit,
        },
        i,
      ),
    );
  }
  const tickets: UsageTicket[] = [];
  try {
    for (const p of plans) {
      tickets.push(
        await ctx.meter.begin(req.principal!, {
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
    for (const t of tickets) t.refund('bulk refused');
    throw err;
  }

  const zip = new ZipWriter(res);
  let current: CopyStream | null = null;
  let clientGone = false;
  const onClose = (): void => {
    if (!res.writableFinished) {
      clientGone = true;
      // Interrupts DuckDB; the ZIP writer, waiting on the COPY's stream or on a drain, then fails too.
      current?.cancel('client disconnected');
    }
  };
  res.once('close', onClose);
  res.status(200);
  res.setHeader('Content-Type', 'application/zip');
  res.setHeader('Content-Disposition', contentDisposition(`pmlake_bulk_${new Date().toISOString().replace(/[:.]/g, '-')}.zip`));
  res.setHeader('Cache-Control', 'no-store');

  const manifest: ManifestItem[] = [];
  try {
    for (const [i, p] of plans.entries()) {
      const name = `${String(i + 1).padStart(2, '0')}_${p.fileName}`;
      const copy = await startCopy(ctx.db, p.query, p.format);
      current = copy;
      const head = await preflight(copy.stream);
      const request = { ...body.items[i], start: p.start, end: p.end, timeframe: p.timeframe ?? null };
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
          });
          continue;
        }
      }
      const hash = crypto.createHash('sha256');
      const entry = await zip.addStream(name, copy, head.chunks, !head.ended, (b) => hash.update(b));
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
      });
    }
    current = null;
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
        },
        null,
        2,
      ),
    );
    await zip.finish();
    if (clientGone) throw new Error('client disconnected');
  } catch (err) {
    res.off('close', onClose);
    current?.cancel('bulk failed');
    const sent = zip.bytesWritten;
    if (clientGone) {
      settle(tickets, manifest, sent, true);
      return;
    }
    for (const t of tickets) t.refund('bulk download failed');
    req.log.error({ err }, 'bulk download failed');
    if (!res.headersSent) throw err;
    res.destroy();
    return;
  }
  const sent = zip.bytesWritten;
  res.off('close', onClose);
  res.locals.rows = manifest.reduce((a, m) => a + m.rows, 0);
  res.locals.bytes = sent;
  settle(tickets, manifest, sent, false);
}

/**
 * One history record per item with its rows and file bytes; the ZIP's own framing (local headers, central
 * directory, manifest) is added to the last served item, so the recorded bytes sum to the bytes sent.
 * Empty items are refunded. A client that left mid-bundle is charged for what it received.
 */
function settle(tickets: UsageTicket[], manifest: ManifestItem[], sent: number, partial: boolean): void {
  // Bytes leave in item order. The last charged item is the one in flight when the client left, or else the
  // last item that had rows; it takes whatever remains, so the records add up to the bytes sent.
  const inFlight = partial && manifest.length < tickets.length ? manifest.length : -1;
  let lastCharged = inFlight;
  if (lastCharged === -1) manifest.forEach((m, i) => (m.status === 'ok' ? (lastCharged = i) : undefined));
  let remaining = sent;
  tickets.forEach((t, i) => {
    const m = manifest[i];
    if ((m && m.status === 'ok') || i === inFlight) {
      const bytes = i === lastCharged ? remaining : Math.min(m?.bytes ?? 0, remaining);
      remaining -= bytes;
      t.commit({ bytes, rows: m?.rows ?? 0 });
    } else {
      t.refund(m ? 'empty item' : 'bundle ended before this item');
    }
  });
}
