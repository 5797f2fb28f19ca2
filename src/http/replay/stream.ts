import type { Socket } from 'node:net';
import { WebSocket } from 'ws';
import type { LiveStream, StreamStop } from '../../accounts/streams.js';
import { Pacer, type PacingStats } from '../../replay/pacer.js';
import { SocketDelivery } from '../delivery.js';
import { textFrames } from './text-frames.js';

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
  /**
   * The stream's place among the user's streams (src/accounts/streams.ts): every frame's bytes are taken from
   * the user's fair use before it goes (none left: closed 4429), and a revocation or plan change stops it.
   */
  live?: LiveStream;
  /** Counts every frame sent (the server's counters, a bench). */
  onSent?: (bytes: number) => void;
};

export type ReplayStreamEnd = {
  /**
   * end: the window was replayed (closed 1000); left: the client went; allowance: cut (4429); stopped: its key,
   * account or plan no longer allows it (4401 / 4402); error: the source failed (1011).
   */
  reason: 'end' | 'left' | 'allowance' | 'stopped' | 'error';
  frames: number;
  /** Bytes to charge: all that was sent, or for a client that left what reached it (src/http/delivery.ts). */
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
  unauthorized: 4401,
  notCovered: 4402,
} as const;

/** The close code and reason of a stream its registry stopped. */
export function stopClose(stop: StreamStop): { code: number; reason: string } {
  const code = stop.code === 'fair_use_cap' ? CLOSE.allowance : stop.code === 'plan_changed' ? CLOSE.notCovered : CLOSE.unauthorized;
  return { code, reason: `${stop.code}: ${stop.message}` };
}

/**
 * Bytes waiting in the socket above which the source is not pulled until the socket drains: enough for a
 * batch at full speed, small beside what the kernel itself queues for a client that stopped reading.
 */
const HIGH_WATER = 256 * 1024;

/**
 * Writes the replay's frames with back-pressure: `write` returns true at once while less than HIGH_WATER bytes
 * wait in the socket, else a promise resolved when the socket has drained (false: it closed). Frames go to ws's
 * TCP socket directly, a batch in one buffer (./text-frames.ts): ws itself writes each of its own frames (the
 * PONGs, the close) whole and at once, uncompressed (the server refuses permessage-deflate), so writes from
 * both never interleave inside a frame; a socket no longer OPEN for ws (a close under way) gets nothing more.
 */
export class FrameWriter {
  readonly socket: Socket;

  constructor(private readonly ws: WebSocket) {
    // ws keeps its TCP socket private.
    this.socket = (ws as unknown as { _socket: Socket })._socket;
  }

  /** Writes the first `count` texts as text frames: true while the socket has room, else a promise of it. */
  write(texts: readonly string[], lengths: readonly number[], count: number): boolean | Promise<boolean> {
    if (this.ws.readyState !== WebSocket.OPEN || this.socket.destroyed) return false;
    if (count === 0) return true;
    this.socket.write(textFrames(texts, lengths, count));
    return this.socket.writableLength > HIGH_WATER ? this.drained() : true;
  }

  /** Resolves once the socket has written its queue out (true) or closed (false). */
  private drained(): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const done = (): void => {
        this.socket.off('drain', done);
        this.ws.off('close', done);
        resolve(this.ws.readyState === WebSocket.OPEN);
      };
      this.socket.on('drain', done);
      this.ws.on('close', done);
    });
  }
}

/** A source yields frames one by one or in batches (a batch costs one await instead of one per frame). */
export type ReplayStreamSource = AsyncIterable<ReplayStreamItem | readonly ReplayStreamItem[]>;

export async function serveReplayStream(ws: WebSocket, source: ReplayStreamSource, o: ReplayStreamOptions): Promise<ReplayStreamEnd> {
  const pacer = new Pacer(o.speed, o.originMs);
  const writer = new FrameWriter(ws);
  const delivery = new SocketDelivery(writer.socket);
  const signal = o.abort.signal;
  const onClose = (): void => o.abort.abort();
  const onStop = (): void => o.abort.abort();
  ws.once('close', onClose);
  o.live?.signal.addEventListener('abort', onStop, { once: true });
  let frames = 0;
  let bytes = 0;
  const end = (reason: ReplayStreamEnd['reason'], error?: unknown): ReplayStreamEnd => {
    const stop = o.live?.stopped;
    if (reason === 'left' && stop) {
      reason = 'stopped';
      const c = stopClose(stop);
      close(ws, c.code, c.reason);
    }
    // A client that left is charged what reached it; every other end drains what was sent to the client.
    const charged = reason === 'left' ? delivery.delivered(bytes) : bytes;
    return { reason, frames, bytes: charged, pacing: pacer.stats(), ...(error === undefined ? {} : { error }) };
  };
  try {
    for await (const got of source) {
      if (signal.aborted) return end('left');
      const batch: readonly ReplayStreamItem[] = Array.isArray(got) ? got : [got as ReplayStreamItem];
      // Paced, each frame waits for its time and goes alone; at full speed the batch goes in one write.
      for (const group of o.speed > 0 ? batch.map((item) => [item]) : [batch]) {
        const head = group[0];
        if (o.speed > 0 && head !== undefined && typeof head !== 'string' && !(await pacer.wait(head.recvMs, signal))) return end('left');
        const texts = group.map((item) => (typeof item === 'string' ? item : item.text));
        const lengths = texts.map((t) => Buffer.byteLength(t));
        const groupBytes = lengths.reduce((a, n) => a + n, 0);
        // The group's bytes come out of the user's fair use first; with too little left, the frames that fit go.
        let count = texts.length;
        let sending = groupBytes;
        const taken = o.live ? o.live.take(groupBytes) : true;
        if (taken !== true && !(await taken)) {
          if (signal.aborted) return end('left');
          const left = o.live!.left;
          count = 0;
          sending = 0;
          while (count < texts.length && sending + lengths[count]! <= left) sending += lengths[count++]!;
          if (sending > 0) o.live!.take(sending);
        }
        const written = writer.write(texts, lengths, count);
        if (written === false) return end('left');
        frames += count;
        bytes += sending;
        delivery.wrote(bytes);
        for (let i = 0; i < count; i++) o.onSent?.(lengths[i]!);
        if (written !== true) {
          const ok = await written;
          delivery.wrote(bytes);
          if (!ok) return end('left');
        }
        if (count < texts.length) {
          close(ws, CLOSE.allowance, 'fair_use_cap: the fair-use volume of the plan is reached');
          return end('allowance');
        }
      }
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
    o.live?.signal.removeEventListener('abort', onStop);
    delivery.close();
    if (!signal.aborted && ws.readyState !== WebSocket.OPEN) o.abort.abort();
  }
}

/** Closes with a code and reason (a reason is at most 123 bytes on the wire). */
export function close(ws: WebSocket, code: number, reason: string): void {
  if (ws.readyState !== WebSocket.OPEN && ws.readyState !== WebSocket.CONNECTING) return;
  ws.close(code, Buffer.from(reason).subarray(0, 123).toString());
}
