import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import type { Logger } from 'pino';
import { announcedAssets } from './announcements.js';
import { CaptureFile, type CaptureSink } from './capture-file.js';
import { assetsLine, disconnectLine, frameLine, outageLine, stopLine, subscribeLine } from './capture-lines.js';
import { lastCapturedMs, recoverOpenFiles } from './capture-recovery.js';
import { VenueConnection, type ConnectionEvents, type Interruption } from './connection.js';

export type RecorderOptions = {
  url: string;
  outDir: string;
  recorderId: string;
  rotateSeconds: number;
  /** A pinned list: exactly these assets, no discovery, no announced markets. */
  assets?: string[];
  /** The live assets of the catalogue, asked at start and every `refreshSeconds`. */
  discoverAssets?: () => Promise<string[]>;
  refreshSeconds?: number;
  maxAssetsPerConnection?: number;
  pingSeconds?: number;
  /** The write queue's bound in bytes (the sockets pause above it). */
  maxQueueBytes?: number;
  /** How the capture file is opened (the file system unless given: a test's slow disk). */
  openSink?: (file: string) => Promise<CaptureSink>;
  log: Logger;
};

export type RecorderStats = { connections: number; assets: number; frames: number; bytes: number; reconnects: number; queueBytes: number; filesClosed: number };

type Drops = { count: number; fromMs: number };

/**
 * The recorder of the venue's market channel (docs/capture-format.md): its assets sharded over connections of
 * at most `maxAssetsPerConnection`, every frame written as received into rotating capture files, every loss
 * written as an outage when its assets are subscribed again.
 */
export class Recorder {
  private file!: CaptureFile;
  private readonly connections: VenueConnection[] = [];
  private readonly known = new Set<string>();
  private readonly lastWritten = new Map<number, number>();
  private readonly drops = new Map<number, Drops>();
  private refresher: NodeJS.Timeout | null = null;
  private refreshing = false;
  private paused = false;
  private stopped = false;
  private fileClosing = false;
  private readonly events: ConnectionEvents = {
    frame: (conn, text, ms) => this.onFrame(conn, text, ms),
    subscribed: (conn, assets, ms, ended) => {
      this.file.append(subscribeLine(ms, conn, assets), ms);
      if (ended && ended.assets.length > 0) this.file.append(outageLine(ms, ended.fromMs, ms, ended.assets, ended.reason), ms);
    },
    disconnected: (conn, code, reason, ms) => this.file.append(disconnectLine(ms, conn, code, reason), ms),
  };

  private constructor(
    private readonly opts: RecorderOptions,
    readonly session: string,
    private readonly restartedFrom: number | null,
  ) {}

  static async start(opts: RecorderOptions): Promise<Recorder> {
    await fs.promises.mkdir(opts.outDir, { recursive: true });
    const recovered = await recoverOpenFiles(opts.outDir, opts.rotateSeconds, opts.log);
    const r = new Recorder(opts, randomUUID(), await lastCapturedMs(opts.outDir));
    r.file = await CaptureFile.open({
      dir: opts.outDir,
      recorderId: opts.recorderId,
      session: r.session,
      url: opts.url,
      rotateSeconds: opts.rotateSeconds,
      header: (ms) => r.connections.filter((c) => c.live).map((c) => assetsLine(ms, c.conn, c.assets)),
      ...(opts.maxQueueBytes !== undefined ? { maxQueueBytes: opts.maxQueueBytes } : {}),
      ...(opts.openSink ? { openSink: opts.openSink } : {}),
      onPressure: (paused) => r.onPressure(paused),
      log: opts.log,
    });
    opts.log.info({ dir: opts.outDir, session: r.session, recovered, restartedFrom: r.restartedFrom }, 'recorder started');
    r.addAssets(opts.assets ?? (await r.discover()), true);
    // With nothing to subscribe yet, one connection still listens for the markets the venue announces.
    if (!opts.assets && r.connections.length === 0) r.openConnection([], null);
    if (!opts.assets && opts.discoverAssets) {
      r.refresher = setInterval(() => void r.refresh(), (opts.refreshSeconds ?? 300) * 1000);
    }
    return r;
  }

  stats(): RecorderStats {
    const sum = (f: (c: VenueConnection) => number): number => this.connections.reduce((s, c) => s + f(c), 0);
    return {
      connections: this.connections.length,
      assets: this.known.size,
      frames: sum((c) => c.frames),
      bytes: sum((c) => c.bytes),
      reconnects: sum((c) => c.reconnects),
      queueBytes: this.file.queueBytes,
      filesClosed: this.file.filesClosed,
    };
  }

  /**
   * Closes the sockets, writes `stop` and closes the open file into place. Frames that arrive while the sockets
   * close (the venue's last ones before it saw the close) are still written.
   */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.refresher) clearInterval(this.refresher);
    await Promise.all(this.connections.map((c) => c.stop()));
    this.fileClosing = true;
    const now = Date.now();
    for (const conn of this.drops.keys()) this.writeDrops(conn, now);
    await this.file.close(stopLine(now), now);
    this.opts.log.info(this.stats(), 'recorder stopped');
  }

  /** New assets fill the last connection, then open new ones; an asset already recorded is not subscribed twice. */
  private addAssets(assets: readonly string[], atStart = false): void {
    const fresh = [...new Set(assets)].filter((a) => !this.known.has(a));
    const max = this.opts.maxAssetsPerConnection ?? 500;
    let i = 0;
    while (i < fresh.length) {
      const last = this.connections.at(-1);
      if (last && last.size < max) {
        const take = fresh.slice(i, i + max - last.size);
        for (const a of take) this.known.add(a);
        last.subscribe(take);
        i += take.length;
        continue;
      }
      const take = fresh.slice(i, i + max);
      for (const a of take) this.known.add(a);
      i += take.length;
      this.openConnection(take, atStart && this.restartedFrom !== null ? { fromMs: this.restartedFrom, assets: take, reason: 'recorder restarted' } : null);
    }
  }

  private openConnection(assets: string[], pending: Interruption | null): void {
    const pingMs = (this.opts.pingSeconds ?? 10) * 1000;
    const c = new VenueConnection(
      { url: this.opts.url, conn: this.connections.length, pingMs, stallMs: 3 * pingMs, events: this.events, log: this.opts.log, pending },
      assets,
    );
    this.connections.push(c);
    if (this.paused) c.pause();
    c.start();
  }

  private onFrame(conn: number, text: string, ms: number): void {
    if (this.fileClosing) return;
    if (this.file.full()) {
      const d = this.drops.get(conn);
      if (d) d.count++;
      else this.drops.set(conn, { count: 1, fromMs: this.lastWritten.get(conn) ?? ms });
    } else {
      this.writeDrops(conn, ms);
      this.file.append(frameLine(ms, conn, text), ms);
      this.lastWritten.set(conn, ms);
    }
    // Even a dropped announcement subscribes its market: the market's own messages are still to come.
    if (!this.opts.assets && !this.stopped) {
      const announced = announcedAssets(text);
      if (announced.length > 0) this.addAssets(announced);
    }
  }

  /** Frames dropped on a full queue are never lost silently: an outage for the connection's assets says how many. */
  private writeDrops(conn: number, ms: number): void {
    const d = this.drops.get(conn);
    if (!d) return;
    this.drops.delete(conn);
    const assets = this.connections[conn]?.assets ?? [];
    this.file.append(outageLine(ms, d.fromMs, ms, assets, `write queue full: ${d.count} frames dropped`), ms);
    this.opts.log.error({ conn, dropped: d.count }, 'capture frames dropped on a full write queue');
  }

  private onPressure(paused: boolean): void {
    this.paused = paused;
    this.opts.log.warn({ paused, queueBytes: this.file?.queueBytes }, paused ? 'disk behind: pausing the venue sockets' : 'disk caught up: resuming');
    for (const c of this.connections) {
      if (paused) c.pause();
      else c.resume();
    }
  }

  private async discover(): Promise<string[]> {
    if (!this.opts.discoverAssets) return [];
    try {
      return await this.opts.discoverAssets();
    } catch (err) {
      this.opts.log.warn({ err }, 'cannot list the live assets of the catalogue; keeping the current ones');
      return [];
    }
  }

  private async refresh(): Promise<void> {
    if (this.refreshing || this.stopped) return;
    this.refreshing = true;
    try {
      const assets = await this.discover();
      if (!this.stopped) this.addAssets(assets);
    } finally {
      this.refreshing = false;
    }
  }
}
