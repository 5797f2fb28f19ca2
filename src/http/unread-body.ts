import type { IncomingMessage, ServerResponse } from 'node:http';
import { finished } from 'node:stream';

/**
 * Most clients send a request's whole body before they read the answer. An answer written while the body is still
 * arriving (a refusal of the gate: 401, 403, 413, before the JSON step reads anything) is seen only if the
 * connection outlives the upload. Node reads off the rest of the body after the answer only on a connection it
 * keeps: one that ends with the answer (the client sent `Connection: close`, or spoke HTTP/1.0) is closed while the
 * upload still arrives, and the client meets a broken pipe or a reset, never the answer. So an error answered
 * before its body was read waits until the body has been read and thrown away, as the JSON step does with a body
 * it refuses; the answer then finds the client reading.
 *
 * Bounded: a body declared or found to be larger than MAX_DRAINED_BYTES is not waited for; the answer goes at once
 * with `Connection: close` (no client of a JSON API sends that much by mistake).
 */
export const MAX_DRAINED_BYTES = 64 * 1024 * 1024;

/** Calls `answer` once the request's body is in (at once when it already is), or not at all if the client left. */
export function afterBody(req: IncomingMessage, res: ServerResponse, answer: () => void): void {
  // complete: every byte of the body has arrived; what is left in memory Node discards after the answer.
  if (req.complete || res.headersSent) return answer();
  if (Number(req.headers['content-length']) > MAX_DRAINED_BYTES) {
    res.setHeader('Connection', 'close');
    return answer();
  }
  let read = 0;
  let settled = false;
  const settle = (close: boolean): void => {
    if (settled) return;
    settled = true;
    req.off('data', onData);
    stopWatching();
    if (req.socket.destroyed) return;
    if (close) res.setHeader('Connection', 'close');
    answer();
  };
  const onData = (chunk: Buffer): void => {
    read += chunk.length;
    if (read > MAX_DRAINED_BYTES) settle(true);
  };
  // Ends with the body, or early when the client goes away (then there is no one to answer).
  const stopWatching = finished(req, () => settle(false));
  req.on('data', onData);
}
