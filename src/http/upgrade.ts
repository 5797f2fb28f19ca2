import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AppContext } from './context.js';

/** An HTTP upgrade request (a WebSocket handshake) the server hands over with its socket. */
export type UpgradeHandler = (req: IncomingMessage, socket: Duplex, head: Buffer) => void;

/**
 * The server's WebSocket endpoints (`/v1/replay/ws/...`): being built. Until then every upgrade is refused as
 * an unknown path, with the JSON `detail` every other refusal carries.
 */
export function createUpgradeHandler(_ctx: AppContext): UpgradeHandler {
  return (_req, socket) => {
    const body = JSON.stringify({ detail: 'Not Found' });
    socket.end(`HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
  };
}
