import { WebSocket } from 'ws';
import { Pacer, type PacingStats } from '../../replay/pacer.js';

/**
 * The socket side of every replay stream (the venue's market channel, and any other stream the server replays):
 * pace the source's items by their recorded receive times, send each as a text frame, hold the source while the
 * client is behind (bounded memory: the source is pulled only when the socket has room), stop at once when the
 * client leaves, and close the socket with the code that says why the stream ended.
 */
export type ReplayStreamItem = string | { recvMs: number; text: string };

export type ReplayStreamOptions = {
  /** 1 = as recorded, 60 = sixty times faster, 0 = as fast as the client reads. */
  speed: number;
  /** The recorded instant the replay starts at (epoch ms): the pacing origin. */
  originMs: number;
  /** Aborted when the client leaves (serveReplayStream aborts it too); the source should stop reading then. */
  abort: AbortController;
  /** Bytes the caller may still be sent (the plan's fair use left); past it the stream is cut with 4429. */
  allowanceBytes?: number;
  /** Counts every frame sent (the server's counters, a bench). */
  onSent?: (bytes: number) => void;
};

export type ReplayStreamEnd = {
  /** end: the window was replayed (closed 1000); left: the client went; allowance: cut (4429); error: the source failed (1011). */
  reason: 'end' | 'left' | 'allowance' | 'error';
  frames: number;
  bytes: number;
  pacing: PacingStats;
  error?: unknown;
};

/** Close codes of the replay (docs/api.md, "Replay"). */
export const CLOSE = {
  end: 1000,
  error: 1011,
  malformed: 4400,
  unknownAsset: 4404,
  noSubscription: 4408,
  tooManyAssets: 4413,
  allowance: 4429,
} as const;

/** Bytes handed to the socket and not yet written out above which the source is not pulled. */
const HIGH_WATER = 1 << 20;
const LOW_WATER = 256 << 10;

/**
 * Sends with back-pressure: `send` resolves at once while less than HIGH_WATER bytes wait in the socket, else
 * once the socket has written enough of them out (ws calls each send's callback when its bytes were written).
 */
export class BackPressuredSender {
  private waiting = 0;
  private wake: (() => void) | null = null;

  constructor(private readonly ws: WebSocket) {
    ws.once('close', () => this.release());
  }

  async send(text: string): Promise<boolean> {
    if (this.ws.readyState !== WebSocket.OPEN) return false;
    const n = Buffer.byteLength(text);
    this.waiting += n;
    this.ws.send(text, () => {
      this.waiting -= n;
      if (this.waiting <= LOW_WATER) this.release();
    });
    if (this.waiting > HIGH_WATER || this.ws.bufferedAmount > HIGH_WATER) {
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
    return this.ws.readyState === WebSocket.OPEN;
  }

  private release(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }
}

export async function serveReplayStream(ws: WebSocket, source: AsyncIterable<ReplayStreamItem>, o: ReplayStreamOptions): Promise<ReplayStreamEnd> {
  const pacer = new Pacer(o.speed, o.originMs);
  const sender = new BackPressuredSender(ws);
  const signal = o.abort.signal;
  const onClose = (): void => o.abort.abort();
  ws.once('close', onClose);
  let frames = 0;
  let bytes = 0;
  const end = (reason: ReplayStreamEnd['reason'], error?: unknown): ReplayStreamEnd => ({
    reason,
    frames,
    bytes,
    pacing: pacer.stats(),
    ...(error === undefined ? {} : { error }),
  });
  try {
    for await (const item of source) {
      if (signal.aborted) return end('left');
      const text = typeof item === 'string' ? item : item.text;
      if (typeof item !== 'string' && !(await pacer.wait(item.recvMs, signal))) return end('left');
      const n = Buffer.byteLength(text);
      if (o.allowanceBytes !== undefined && bytes + n > o.allowanceBytes) {
        close(ws, CLOSE.allowance, 'fair-use volume of the plan reached');
        return end('allowance');
      }
      if (!(await sender.send(text))) return end('left');
      frames++;
      bytes += n;
      o.onSent?.(n);
    }
    if (signal.aborted || ws.readyState !== WebSocket.OPEN) return end('left');
    close(ws, CLOSE.end, 'end of the replay window');
    return end('end');
  } catch (err) {
    if (signal.aborted) return end('left');
    close(ws, CLOSE.error, 'replay failed; nothing is charged');
    return end('error', err);
  } finally {
    ws.off('close', onClose);
    if (!signal.aborted && ws.readyState !== WebSocket.OPEN) o.abort.abort();
  }
}

/** Closes with a code and reason (a reason is at most 123 bytes on the wire). */
export function close(ws: WebSocket, code: number, reason: string): void {
  if (ws.readyState !== WebSocket.OPEN && ws.readyState !== WebSocket.CONNECTING) return;
  ws.close(code, Buffer.from(reason).subarray(0, 123).toString());
}
