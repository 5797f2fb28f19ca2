/**
 * WebSocket text frames (RFC 6455 §5.2) of many messages written into one buffer: the replay's frames to a fast
 * client leave in one socket write per batch, where `ws.send` costs an options object, a header buffer and two
 * socket writes per message. Server frames are never masked; every frame here is final (FIN) and a text frame
 * (opcode 1). The header: 1 byte FIN|opcode, then the payload length in 7 bits, or 126 + 16 bits, or 127 + 64
 * bits, big-endian. `lengths`: each text's UTF-8 bytes (computed when not given); `count`: the first texts only.
 */
export function textFrames(texts: readonly string[], lengths: readonly number[] = texts.map((t) => Buffer.byteLength(t)), count = texts.length): Buffer {
  let total = 0;
  for (let i = 0; i < count; i++) total += headerBytes(lengths[i]!) + lengths[i]!;
  const buf = Buffer.allocUnsafe(total);
  let at = 0;
  for (let i = 0; i < count; i++) {
    const n = lengths[i]!;
    buf[at++] = 0x81;
    if (n < 126) {
      buf[at++] = n;
    } else if (n < 65_536) {
      buf[at++] = 126;
      buf.writeUInt16BE(n, at);
      at += 2;
    } else {
      buf[at++] = 127;
      buf.writeBigUInt64BE(BigInt(n), at);
      at += 8;
    }
    at += buf.write(texts[i]!, at, 'utf8');
  }
  return buf;
}

export function headerBytes(payload: number): number {
  return payload < 126 ? 2 : payload < 65_536 ? 4 : 10;
}
