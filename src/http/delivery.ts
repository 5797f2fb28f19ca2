import fs from 'node:fs';
import type { Socket } from 'node:net';

/**
 * What of a stream's bytes reached the client, for charging a client that left mid-way. Bytes handed to
 * `socket.write` are not yet sent: Node holds some (`writableLength`) and the kernel holds the rest of what
 * the peer has not acknowledged (its send queue, up to the socket's send buffer, megabytes on a fast link). A
 * client that stops reading leaves both full; charging them would bill bytes it never received.
 *
 * The kernel's queue is read from /proc/net/tcp{,6} (`tx_queue`: written but not acknowledged by the peer),
 * by one sampler for every tracked socket of the process, only while some are tracked: when a write backs up,
 * every SAMPLE_MS while one stays tracked, and synchronously when the client half-closes (its FIN: the socket
 * is still there to read). Once a client has gone the socket's entry is gone too, so the last sample stands.
 * Where /proc is not there (not Linux), only Node's own buffer is subtracted.
 */
const SAMPLE_MS = 200;
const MIN_GAP_MS = 20;

type Queues = Map<string, number>;

const tracked = new Set<SocketDelivery>();
let timer: NodeJS.Timeout | null = null;
let sampling = false;
let lastSample = 0;
let procMissing = false;

/** Node's own accounting of a socket's writes (net.Socket keeps them on the instance and its libuv handle). */
type SocketInternals = Socket & { _bytesDispatched?: number; _handle?: { writeQueueSize?: number } | null };

export class SocketDelivery {
  /** The stream's payload bytes written, and the socket's bytes not yet acknowledged by the peer, when last seen. */
  private payload = 0;
  private unsent = 0;
  /** The kernel's unacknowledged bytes at the last sample. */
  private queued = 0;
  private readonly key: string | null;
  private readonly onEnd = (): void => {
    const q = readQueuesSync();
    if (q) this.apply(q);
  };

  constructor(private readonly socket: Socket) {
    this.key = socket.localPort !== undefined && socket.remotePort !== undefined ? `${socket.localPort}:${socket.remotePort}` : null;
    tracked.add(this);
    socket.once('end', this.onEnd);
    if (!timer) {
      timer = setInterval(() => void sampleAll(), SAMPLE_MS);
      timer.unref();
    }
  }

  /** After each write (or drain), with the stream's running count of payload bytes written. */
  wrote(payloadTotal: number): void {
    if (this.socket.destroyed) return;
    this.payload = payloadTotal;
    this.observe();
    // Backed up: the kernel's queue is full now, which is what a client that stops reading leaves behind. At
    // most one read of /proc per MIN_GAP_MS however fast the chunks go.
    if (this.socket.writableLength > 0 && Date.now() - lastSample >= MIN_GAP_MS) void sampleAll();
  }

  /**
   * The payload bytes to charge a client that left: what was written less what the socket had not delivered
   * (counted in socket bytes, framing included, so never more than reached the client).
   */
  delivered(payloadTotal: number): number {
    return Math.max(0, Math.min(payloadTotal, this.payload - this.unsent));
  }

  apply(q: Queues): void {
    if (this.key === null || this.socket.destroyed) return;
    const n = q.get(this.key);
    if (n === undefined) return;
    this.queued = n;
    this.observe();
  }

  /**
   * Unsent = in the Writable's buffer (written, not yet dispatched to libuv) + in libuv's queue + in the
   * kernel's. `writableLength` alone is not it: it counts a chunk whole until libuv has written all of it,
   * though the kernel may already hold most of it.
   */
  private observe(): void {
    const s = this.socket as SocketInternals;
    const dispatched = s._bytesDispatched;
    const node = dispatched === undefined ? s.writableLength : Math.max(0, s.bytesWritten - dispatched) + (s._handle?.writeQueueSize ?? 0);
    this.unsent = node + this.queued;
  }

  close(): void {
    this.socket.off('end', this.onEnd);
    tracked.delete(this);
    if (tracked.size === 0 && timer) {
      clearInterval(timer);
      timer = null;
    }
  }
}

async function sampleAll(): Promise<void> {
  if (sampling || tracked.size === 0 || procMissing) return;
  sampling = true;
  lastSample = Date.now();
  try {
    const texts = await Promise.all(['/proc/net/tcp', '/proc/net/tcp6'].map((f) => fs.promises.readFile(f, 'latin1').catch(() => '')));
    if (texts.every((t) => t === '')) procMissing = true;
    const q = parseQueues(texts);
    for (const d of tracked) d.apply(q);
  } finally {
    sampling = false;
  }
}

function readQueuesSync(): Queues | null {
  if (procMissing) return null;
  const texts = ['/proc/net/tcp', '/proc/net/tcp6'].map((f) => {
    try {
      return fs.readFileSync(f, 'latin1');
    } catch {
      return '';
    }
  });
  return parseQueues(texts);
}

/**
 * `local_port:remote_port` → tx_queue of each socket in /proc/net/tcp's format
 * (`sl local_address rem_address st tx_queue:rx_queue …`, addresses `HEXIP:HEXPORT`). Two sockets on the same
 * ports with other addresses keep the larger queue: charging less is the safe side.
 */
export function parseQueues(texts: readonly string[]): Queues {
  const out: Queues = new Map();
  for (const text of texts) {
    for (const line of text.split('\n')) {
      const f = line.trim().split(/\s+/);
      if (f.length < 5 || !f[0]!.endsWith(':')) continue;
      const lp = f[1]!.slice(f[1]!.lastIndexOf(':') + 1);
      const rp = f[2]!.slice(f[2]!.lastIndexOf(':') + 1);
      const tx = f[4]!.slice(0, f[4]!.indexOf(':'));
      const key = `${parseInt(lp, 16)}:${parseInt(rp, 16)}`;
      const n = parseInt(tx, 16);
      if (!Number.isFinite(n)) continue;
      out.set(key, Math.max(out.get(key) ?? 0, n));
    }
  }
  return out;
}
