import net from 'node:net';

/**
 * A lean HTTP/1.1 keep-alive connection for closed-loop load: one request at a time, the request bytes written
 * in one call, the answer read only as far as its status, length and end. node:http's client costs so much CPU
 * per request on shared cores that it, not the server, would set the pace; this one costs about what
 * autocannon's does. Unlike autocannon, an
 * answer still in flight when the run ends is waited for, which is what the oldest-request figure needs.
 */
export type Answer = { status: number; ms: number };

const HEAD_END = Buffer.from('\r\n\r\n');
const CHUNKED_END = Buffer.from('0\r\n\r\n');

export class Connection {
  private socket: net.Socket | null = null;
  private pending: { resolve: (a: Answer) => void; t0: number; timer: NodeJS.Timeout } | null = null;
  private head: Buffer[] = [];
  private status = 0;
  private left = -1; // body bytes still expected; -2 = chunked (read to the terminating chunk)
  private tail = Buffer.alloc(0);

  constructor(
    private readonly port: number,
    private readonly timeoutMs: number,
  ) {}

  /** GET `path`; status 0 = no answer within the timeout, -1 = connection error. */
  get(path: string, headers: Record<string, string>): Promise<Answer> {
    const s = this.socket ?? this.open();
    const lines = [`GET ${path} HTTP/1.1`, `Host: 127.0.0.1:${this.port}`, ...Object.entries(headers).map(([k, v]) => `${k}: ${v}`), '', ''];
    return new Promise((resolve) => {
      const t0 = performance.now();
      const timer = setTimeout(() => this.fail(0), this.timeoutMs);
      this.pending = { resolve, t0, timer };
      this.head = [];
      this.left = -1;
      s.write(lines.join('\r\n'));
    });
  }

  close(): void {
    this.socket?.destroy();
    this.socket = null;
  }

  private open(): net.Socket {
    const s = net.connect(this.port, '127.0.0.1');
    s.setNoDelay(true);
    s.on('data', (chunk: Buffer) => this.onData(chunk));
    s.on('error', () => this.fail(-1));
    s.on('close', () => {
      if (this.socket === s) this.socket = null;
      this.fail(-1);
    });
    this.socket = s;
    return s;
  }

  private onData(chunk: Buffer): void {
    if (!this.pending) return;
    if (this.left === -1) {
      this.head.push(chunk);
      const all = this.head.length === 1 ? chunk : Buffer.concat(this.head);
      const at = all.indexOf(HEAD_END);
      if (at < 0) return;
      const text = all.subarray(0, at).toString('latin1');
      this.status = Number(text.slice(9, 12));
      const len = /\r\ncontent-length:\s*(\d+)/i.exec(text);
      this.left = len ? Number(len[1]) : /\r\ntransfer-encoding:\s*chunked/i.test(text) ? -2 : 0;
      chunk = all.subarray(at + 4);
      this.tail = Buffer.alloc(0);
    }
    if (this.left === -2) {
      // Keep the last bytes only: the answer ends with the zero-length chunk.
      this.tail = Buffer.concat([this.tail, chunk]).subarray(-CHUNKED_END.length);
      if (this.tail.equals(CHUNKED_END)) this.done(this.status);
      return;
    }
    this.left -= chunk.length;
    if (this.left <= 0) this.done(this.status);
  }

  private done(status: number): void {
    const p = this.pending;
    if (!p) return;
    this.pending = null;
    clearTimeout(p.timer);
    p.resolve({ status, ms: performance.now() - p.t0 });
  }

  private fail(status: number): void {
    if (!this.pending) return;
    this.close();
    this.done(status);
  }
}
