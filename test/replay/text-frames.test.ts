import type { EventEmitter } from 'node:events';
import * as ws from 'ws';
import { describe, expect, it } from 'vitest';
import { textFrames } from '../../src/http/replay/text-frames.js';

/** ws's frame parser: exported by the package, absent from its type declarations. */
const { Receiver } = ws as unknown as {
  Receiver: new (o: { isServer: boolean; skipUTF8Validation: boolean }) => EventEmitter & { write(chunk: Buffer): void };
};

/** ws's own frame parser, as a client runs it: every frame must be a final, unmasked text frame it accepts. */
function parse(buf: Buffer): string[] {
  const out: string[] = [];
  const errors: Error[] = [];
  const r = new Receiver({ isServer: false, skipUTF8Validation: false });
  r.on('message', (data: Buffer, isBinary: boolean) => {
    expect(isBinary).toBe(false);
    out.push(data.toString('utf8'));
  });
  r.on('error', (e: Error) => errors.push(e));
  r.write(buf);
  expect(errors).toEqual([]);
  return out;
}

describe('textFrames', () => {
  it('writes each text as one frame a client parses back, at every length encoding (7, 16 and 64 bits)', () => {
    // Multi-byte characters so byte and character lengths differ at each boundary.
    const texts = [
      '',
      'x'.repeat(125),
      'é'.repeat(63),
      'x'.repeat(126),
      '€'.repeat(21_845),
      'x'.repeat(65_535),
      'x'.repeat(65_536),
      `{"a":"${'ü'.repeat(100_000)}"}`,
    ];
    expect(parse(textFrames(texts))).toEqual(texts);
  });

  it('writes only the first `count` texts, with the lengths given', () => {
    const texts = ['{"a":1}', '{"b":2}', '{"c":3}'];
    expect(
      parse(
        textFrames(
          texts,
          texts.map((t) => Buffer.byteLength(t)),
          2,
        ),
      ),
    ).toEqual(texts.slice(0, 2));
  });
});
