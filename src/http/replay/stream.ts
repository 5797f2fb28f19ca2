import type { Socket } from 'node:net';
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
  private readonly socket: Socket | undefined;
  private corked = false;

  constructor(private readonly ws: WebSocket) {
    ws.once('close', () => this.release());
    // ws keeps its TCP socket private; corking it lets the frames sent in one turn of the event loop leave in one
    // write instead of one system call each (the replay's largest cost per frame).
    this.socket = (ws as unknown as { _socket?: Socket })._socket;
  }

  /** Sends one text frame: true at once while the socket has room, else a promise of it (false: the socket closed). */
  send(text: string, bytes: number): boolean | Promise<boolean> {
    if (this.ws.readyState !== WebSocket.OPEN) return false;
    if (this.socket && !this.corked) {
      this.corked = true;
      this.socket.cork();
      setImmediate(() => {
        this.corked = false;
        this.socket!.uncork();
      });
    }
    this.waiting += bytes;
    this.ws.send(text, () => {
      this.waiting -= bytes;
      if (this.waiting <= LOW_WATER) this.release();
    });
    if (this.waiting > HIGH_WATER || this.ws.bufferedAmount > HIGH_WATER) {
      return new Promise<void>((resolve) => (this.wake = resolve)).then(() => this.ws.readyState === WebSocket.OPEN);
    }
    return true;
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
      // At speed 0 nothing waits: no promise per frame.
      if (o.speed > 0 && typeof item !== 'string' && !(await pacer.wait(item.recvMs, signal))) return end('left');
      const n = Buffer.byteLength(text);
      if (o.allowanceBytes !== undefined && bytes + n > o.allowanceBytes) {
        close(ws, CLOSE.allowance, 'fair-use volume of the plan reached');
        return end('allowance');
      }
      const sent = sender.send(text, n);
      if (!(sent === true || (sent !== false && (await sent)))) return end('left');
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
