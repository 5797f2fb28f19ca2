import { loadSpec, type PullSpec } from '../downloads/spec.js';
import type { ExportJobRow } from '../state/exports.js';

/**
 * An export job as the API shows it (the wire shape the anchor's client checks). Its `spec` is the public
 * form of the job's pull, rendered from the stored PullSpec: the fields the caller sent, start/end as ISO
 * text to the millisecond, the timeframe as its label — exactly what the API answered when jobs stored this
 * form itself.
 */
function iso(micros: bigint): string {
  return new Date(Number(micros / 1000n)).toISOString();
}

export function publicSpec(spec: PullSpec): Record<string, unknown> {
  return {
    kind: spec.kind,
    ...(spec.market_id ? { market_id: spec.market_id } : {}),
    ...(spec.series_id ? { series_id: spec.series_id } : {}),
    ...(spec.timeframe ? { timeframe: spec.timeframe.label } : {}),
    ...(spec.kind === 'raw' && spec.shape ? { shape: spec.shape } : {}),
    ...(spec.start !== undefined ? { start: iso(spec.start) } : {}),
    ...(spec.end !== undefined ? { end: iso(spec.end) } : {}),
    format: spec.format,
  };
}

/** A spec that no longer parses is shown as stored (the job's `error` says it failed on it), not a 500. */
function shownSpec(stored: string): unknown {
  try {
    return publicSpec(loadSpec(stored));
  } catch {
    try {
      return JSON.parse(stored) as unknown;
    } catch {
      return null;
    }
  }
}

export function jobView(job: ExportJobRow): Record<string, unknown> {
  return {
    id: job.id,
    status: job.status,
    spec: shownSpec(job.spec),
    file_name: job.file_name,
    format: job.format,
    record_count: job.record_count,
    size_bytes: job.size_bytes,
    progress: { rows_written: job.rows_written, bytes_written: job.bytes_written },
    cost: job.cost,
    disposition: job.status === 'succeeded' ? 'included_in_plan' : null,
    error: job.error,
    attempts: job.attempts,
    created_at: job.created_at,
    started_at: job.started_at,
    completed_at: job.completed_at,
    expires_at: job.expires_at,
    idempotency_key: job.idempotency_key,
  };
}
