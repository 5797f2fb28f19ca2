import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AppContext } from './context.js';
import { createReplayServer } from './replay/index.js';

/** An HTTP upgrade request (a WebSocket handshake) the server hands over with its socket. */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/**
 * The server's WebSocket endpoints: the replays (`/v1/replay/ws/...`, src/http/replay/). Any other path is refused
 * as an unknown path, with the JSON `detail` every other refusal carries.
 */
export function createUpgradeHandler(ctx: AppContext): UpgradeHandler {
  const replay = createReplayServer(ctx);
  return (req, socket, head) => {
    const path = new URL(req.url ?? '/', 'http://pmlake').pathname;
    if (replay.handle(req, socket, head, path)) return;
    const body = JSON.stringify({ detail: 'Not Found' });
    socket.end(`HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  };
}
