import type { Request, Response } from 'express';
import { planDownload, type PlanDeps } from '../downloads/plan.js';
import { sendCopy } from '../downloads/send.js';
import type { PullSpec } from '../downloads/spec.js';
import { CONTENT_TYPES } from '../lake/stream.js';
import type { RequestContext } from './context.js';
import { contentDisposition } from '../downloads/disposition.js';
import { SocketDelivery } from './delivery.js';

/** What planning a pull needs, out of the handler's context. */
export function planDeps(ctx: RequestContext): PlanDeps {
  return { lake: ctx.lake, markets: ctx.markets };
}

/**
 * One GET /v1/download/* answer: the pull planned and streamed by src/downloads/send.ts into the response.
 * The headers go out just before the first byte; a small file (whole within the preflight) gets an exact
 * Content-Length and X-Record-Count. Errors before that point become the usual error answer.
 */
export async function sendDownload(req: Request, res: Response, ctx: RequestContext, spec: PullSpec): Promise<undefined> {
  const plan = await planDownload(planDeps(ctx), req.principal, spec);
  const live = ctx.streams.admit(req.principal!, [plan.dataset]);
  let r;
  try {
    r = await sendCopy(
      ctx,
      req.principal!,
      {
        live,
        query: plan.query,
        format: plan.format,
        emptyMessage: plan.emptyMessage,
        pull: {
          kind: 'download',
          dataset: plan.dataset,
          description: plan.description,
          // Unknown before the query runs: the bytes are reserved as they stream (LiveStream.take).
          estimatedBytes: 0,
          marketId: plan.marketId,
          fileName: plan.fileName,
          timeframe: plan.timeframe,
          start: plan.start,
          end: plan.end,
        },
      },
      {
        out: res,
        delivery: () => new SocketDelivery(res.socket!),
        begin(known) {
          if (known) {
            res.setHeader('Content-Length', String(known.size));
            res.setHeader('X-Record-Count', String(known.rows));
          }
          res.status(200);
          res.setHeader('Accept-Ranges', 'none');
          res.setHeader('Content-Type', CONTENT_TYPES[plan.format]);
          res.setHeader('Content-Disposition', contentDisposition(plan.fileName));
          res.setHeader('Cache-Control', 'no-store');
        },
      },
    );
  } finally {
    live.close();
  }
  // For the request log line: what was sent (rows only for a complete file).
  if (r.complete) res.locals.rows = r.rows;
  if (r.started) res.locals.bytes = r.bytes;
  if (r.error !== undefined) req.log.error({ err: r.error }, 'download failed after headers were sent');
  return undefined;
}
