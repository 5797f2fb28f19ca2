import WebSocket, { type RawData } from 'ws';
import type { Logger } from 'pino';
import { backoffMs } from '../retry.js';

/** Assets whose capture was interrupted, from the last frame received to the next subscription. */
export type Interruption = { fromMs: number; assets: string[]; reason: string };

export type ConnectionEvents = {
  /** A text frame as received (PONG excepted). */
  frame(conn: number, text: string, recvMs: number): void;
  /** Assets subscribed on the socket: all of them when it opens (with the interruption it ends, if any), or added later. */
  subscribed(conn: number, assets: string[], recvMs: number, ended: Interruption | null): void;
  /** An open socket was lost (closed by the venue, an error, or silent for the stall time). */
  disconnected(conn: number, code: number, reason: string, recvMs: number): void;
};

export type ConnectionOptions = {
  url: string;
  conn: number;
  pingMs: number;
  /** No frame (PONG included) for this long on an open socket: it is dead, even if TCP says otherwise. */
  stallMs: number;
  events: ConnectionEvents;
  log: Logger;
  /** An interruption to report on the first subscription (a restarted recorder's gap). */
  pending?: Interruption | null;
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** An open socket that lived this long resets the backoff. */
  healthyMs?: number;
};

function textOf(data: RawData): Buffer {
  if (Array.isArray(data)) return Buffer.concat(data);
  if (data instanceof ArrayBuffer) return Buffer.from(data);
  return data;
}

/**
 * One WebSocket to the venue's market channel and the assets it carries. It subscribes on open
 * (`type: market`, custom features on), adds assets with `operation: subscribe`, sends a text PING every
 * `pingMs`, and reconnects with full-jitter exponential backoff after any loss, resubscribing all its assets.
 */
export class VenueConnection {
  private readonly set = new Set<string>();
  private ws: WebSocket | null = null;
  private subscribedAt = 0;
  private lastFrameMs = 0;
  private lastSeenMs = 0;
  private attempt = 0;
  private pinger: NodeJS.Timeout | null = null;
  private retry: NodeJS.Timeout | null = null;
  private stopping = false;
  private paused = false;
  private stallReason: string | null = null;
  private pending: Interruption | null;
  reconnects = 0;
  frames = 0;
  bytes = 0;

  constructor(
    private readonly opts: ConnectionOptions,
    assets: readonly string[],
  ) {
    for (const a of assets) this.set.add(a);
    this.pending = opts.pending ?? null;
  }

  get conn(): number {
    return this.opts.conn;
  }

  get assets(): string[] {
    return [...this.set];
  }

  get size(): number {
    return this.set.size;
  }

  /** Whether the socket is open and subscribed. */
  get live(): boolean {
    return this.subscribedAt > 0;
  }

  start(): void {
    this.connect();
  }

  /** Adds assets: sent at once on an open socket, else part of the subscription when it opens. */
  subscribe(assets: readonly string[]): void {
    const added = assets.filter((a) => !this.set.has(a));
    for (const a of added) this.set.add(a);
    // Not open: the assets go with the whole subscription when the socket (re)opens.
    if (added.length === 0 || !this.live || this.ws?.readyState !== WebSocket.OPEN) return;
    this.ws.send(JSON.stringify({ assets_ids: added, operation: 'subscribe' }));
    this.opts.events.subscribed(this.opts.conn, added, Date.now(), null);
  }

  /** Stops reading the socket (the write queue is full); the stall clock does not run while paused. */
  pause(): void {
    this.paused = true;
    this.ws?.pause();
  }

  resume(): void {
    this.paused = false;
    this.lastSeenMs = Date.now();
    this.ws?.resume();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.retry) clearTimeout(this.retry);
    this.stopPinging();
    const ws = this.ws;
    if (!ws || ws.readyState === WebSocket.CLOSED) return;
    await new Promise<void>((resolve) => {
      const force = setTimeout(() => ws.terminate(), 2000);
      ws.once('close', () => {
        clearTimeout(force);
        resolve();
      });
      ws.close(1000, 'recorder stopping');
    });
  }

  private connect(): void {
    if (this.stopping) return;
    let ws: WebSocket;
    try {
      ws = new WebSocket(this.opts.url, { handshakeTimeout: 10_000 });
    } catch (err) {
      this.opts.log.error({ err, conn: this.opts.conn }, 'cannot open the venue socket');
      this.scheduleReconnect(0);
      return;
    }
    this.ws = ws;
    let openedAt = 0;
    ws.on('open', () => {
      openedAt = Date.now();
      this.onOpen(ws);
    });
    ws.on('message', (data, isBinary) => this.onMessage(data, isBinary));
    ws.on('error', (err) => this.opts.log.warn({ err: err.message, conn: this.opts.conn }, 'venue socket error'));
    ws.on('close', (code, reason) => {
      this.onClose(code, reason.toString('utf8'));
      this.scheduleReconnect(openedAt);
    });
  }

  private onOpen(ws: WebSocket): void {
    const assets = this.assets;
    ws.send(JSON.stringify({ assets_ids: assets, type: 'market', custom_feature_enabled: true }));
    const now = Date.now();
    this.subscribedAt = now;
    this.lastSeenMs = now;
    this.stallReason = null;
    if (this.paused) ws.pause();
    const ended = this.pending;
    this.pending = null;
    this.opts.events.subscribed(this.opts.conn, assets, now, ended);
    this.pinger = setInterval(() => this.ping(ws), this.opts.pingMs);
    this.pinger.unref();
  }

  private ping(ws: WebSocket): void {
    const now = Date.now();
    if (this.paused) this.lastSeenMs = now;
    if (now - this.lastSeenMs > this.opts.stallMs) {
      this.stallReason = `no PONG for ${this.opts.stallMs / 1000} s`;
      this.opts.log.warn({ conn: this.opts.conn }, 'venue socket silent; reconnecting');
      ws.terminate();
      return;
    }
    if (ws.readyState === WebSocket.OPEN) ws.send('PING');
  }

  private onMessage(data: RawData, isBinary: boolean): void {
    const now = Date.now();
    this.lastSeenMs = now;
    if (isBinary) {
      this.opts.log.warn({ conn: this.opts.conn }, 'binary frame from the venue not recorded (the channel is text)');
      return;
    }
    const buf = textOf(data);
    const text = buf.toString('utf8');
    if (text === 'PONG') return;
    this.lastFrameMs = now;
    this.frames++;
    this.bytes += buf.length;
    this.opts.events.frame(this.opts.conn, text, now);
  }

  private onClose(code: number, reason: string): void {
    this.stopPinging();
    this.ws = null;
    if (!this.live) return;
    const now = Date.now();
    const why = this.stallReason ?? (reason || 'connection lost');
    const from = Math.max(this.lastFrameMs, this.subscribedAt);
    this.subscribedAt = 0;
    if (this.stopping) return;
    this.opts.events.disconnected(this.opts.conn, this.stallReason ? 1006 : code, why, now);
    // An earlier interruption not yet reported (never resubscribed since) keeps its start.
    this.pending ??= { fromMs: from, assets: this.assets, reason: `disconnect: ${why}` };
  }

  private scheduleReconnect(openedAt: number): void {
    if (this.stopping) return;
    const healthy = this.opts.healthyMs ?? 60_000;
    if (openedAt > 0 && Date.now() - openedAt >= healthy) this.attempt = 0;
    const delay = backoffMs(this.attempt, { baseMs: this.opts.backoffBaseMs ?? 500, maxMs: this.opts.backoffMaxMs ?? 30_000 });
    this.attempt = Math.min(this.attempt + 1, 30);
    this.reconnects++;
    this.opts.log.info({ conn: this.opts.conn, delayMs: delay, attempt: this.attempt }, 'reconnecting to the venue');
    this.retry = setTimeout(() => this.connect(), delay);
  }

  private stopPinging(): void {
    if (this.pinger) clearInterval(this.pinger);
    this.pinger = null;
  }
}
