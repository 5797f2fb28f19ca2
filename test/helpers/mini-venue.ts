import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

/**
 * A tiny venue speaking the market channel's protocol over a real WebSocket server on a loopback port: books
 * (an array frame) for every subscription, price changes on demand, PONG for PING, new_market announcements,
 * dropped sockets. It keeps every text it sent, per socket and in order, so tests compare the capture files
 * with what was really sent.
 */
export type VenueSocket = { id: number; ws: WebSocket; assets: Set<string>; received: string[]; sent: string[]; sentAt: number[]; pings: number };

export class MiniVenue {
  readonly sockets: VenueSocket[] = [];
  answerPings = true;
  private seq = 0;

  private constructor(
    private readonly wss: WebSocketServer,
    readonly url: string,
  ) {
    wss.on('connection', (ws) => this.onConnection(ws));
  }

  static async start(port = 0): Promise<MiniVenue> {
    const wss = new WebSocketServer({ host: '127.0.0.1', port });
    await new Promise<void>((resolve, reject) => {
      wss.once('listening', resolve);
      wss.once('error', reject);
    });
    return new MiniVenue(wss, `ws://127.0.0.1:${(wss.address() as AddressInfo).port}`);
  }

  get pings(): number {
    return this.sockets.reduce((s, x) => s + x.pings, 0);
  }

  /** Sockets still open. */
  open(): VenueSocket[] {
    return this.sockets.filter((s) => s.ws.readyState === s.ws.OPEN);
  }

  /** Every text sent to a socket subscribed to `asset` (the socket's id with it). */
  sentFor(asset: string): { socket: number; text: string }[] {
    const out: { socket: number; text: string }[] = [];
    for (const s of this.sockets) for (const text of s.sent) if (text.includes(`"${asset}"`)) out.push({ socket: s.id, text });
    return out;
  }

  /** One price change for each subscribed asset of every open socket (`pad` characters of filler make it bigger). */
  tick(pad = 0): number {
    let n = 0;
    for (const s of this.open()) {
      for (const asset of s.assets) {
        this.send(s, priceChange(asset, ++this.seq, pad));
        n++;
      }
    }
    return n;
  }

  /** Announces a market to every open socket (as the venue does with custom features on). */
  announce(tokens: string[], question: string): string {
    const text = JSON.stringify({
      event_type: 'new_market',
      id: `m${++this.seq}`,
      question,
      market: `0x${this.seq.toString(16)}`,
      assets_ids: tokens,
      clob_token_ids: tokens,
      outcomes: ['Yes', 'No'],
      timestamp: String(Date.now()),
    });
    for (const s of this.open()) this.send(s, text);
    return text;
  }

  drop(socketId: number): void {
    this.sockets[socketId]?.ws.terminate();
  }

  dropAll(): void {
    for (const s of this.open()) s.ws.terminate();
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.ws.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }

  send(s: VenueSocket, text: string): void {
    s.sent.push(text);
    s.sentAt.push(Date.now());
    s.ws.send(text);
  }

  private onConnection(ws: WebSocket): void {
    const s: VenueSocket = { id: this.sockets.length, ws, assets: new Set(), received: [], sent: [], sentAt: [], pings: 0 };
    this.sockets.push(s);
    ws.on('message', (data) => {
      const text = String(data);
      s.received.push(text);
      if (text === 'PING') {
        s.pings++;
        if (this.answerPings) ws.send('PONG');
        return;
      }
      const msg = JSON.parse(text) as { assets_ids: string[] };
      const added = msg.assets_ids.filter((a) => !s.assets.has(a));
      for (const a of added) s.assets.add(a);
      if (added.length > 0) this.send(s, JSON.stringify(added.map((a) => book(a, ++this.seq))));
    });
  }
}

export function book(asset: string, seq: number): object {
  return {
    event_type: 'book',
    asset_id: asset,
    market: '0xabc',
    bids: [{ price: '.48', size: '30' }],
    asks: [{ price: '.52', size: '25' }],
    timestamp: String(seq),
    hash: `0x${seq}`,
  };
}

export function priceChange(asset: string, seq: number, pad = 0): string {
  const changes = [{ asset_id: asset, price: '0.5', size: String(seq), side: 'BUY', hash: `h${seq}`, best_bid: '0.5', best_ask: '0.51' }];
  const filler = pad > 0 ? { pad: 'x'.repeat(pad) } : {};
  return JSON.stringify({ market: '0xabc', price_changes: changes, timestamp: String(seq), event_type: 'price_change', ...filler });
}
