import fs from 'node:fs';

/**
 * Fast text for the venue's wire formats. Prices are kept as integer thousandths ("milli") and sizes as
 * integer hundredths of a share ("cents"), so every string is exact and on-chain amounts (6 decimals) are
 * exact integers: shares×1e6 = cents×1e4 and USDC×1e6 = milli×cents×10.
 */
export const PRICE_STR: string[] = Array.from({ length: 1001 }, (_, m) => {
  if (m === 1000) return '1';
  if (m === 0) return '0';
  return `0.${String(m).padStart(3, '0')}`.replace(/0+$/, '');
});

export function sizeStr(cents: number): string {
  const whole = Math.floor(cents / 100);
  const frac = cents - whole * 100;
  if (frac === 0) return String(whole);
  if (frac % 10 === 0) return `${whole}.${frac / 10}`;
  return `${whole}.${frac < 10 ? '0' : ''}${frac}`;
}

/**
 * Buffered, synchronous line writer: one worker owns one file, so large synchronous writes cost the fewest calls.
 * Text is copied into a byte buffer as it arrives (output is ASCII, so latin1 is exact and skips UTF-8
 * encoding); concatenating one big string first costs far more in flattening and garbage collection.
 */
const CHUNK = 4 << 20;
export class ChunkWriter {
  private fd: number;
  private buf = Buffer.allocUnsafe(CHUNK);
  private used = 0;
  bytes = 0;

  constructor(readonly file: string) {
    this.fd = fs.openSync(file, 'w');
  }

  /** Appends text that already ends with a newline. */
  write(text: string): void {
    if (this.used + text.length > CHUNK) {
      this.flush();
      if (text.length > CHUNK) {
        fs.writeSync(this.fd, Buffer.from(text, 'latin1'));
        this.bytes += text.length;
        return;
      }
    }
    this.used += this.buf.write(text, this.used, 'latin1');
  }

  flush(): void {
    if (this.used === 0) return;
    fs.writeSync(this.fd, this.buf, 0, this.used);
    this.bytes += this.used;
    this.used = 0;
  }

  close(): void {
    this.flush();
    fs.closeSync(this.fd);
  }
}

/** Polygon block height as a pure function of time (2-second blocks), so parallel days agree on numbers. */
const REF_BLOCK = 65_000_000;
const REF_SEC = Date.UTC(2025, 2, 2) / 1000;
export function blockAt(sec: number): number {
  return REF_BLOCK + Math.floor((sec - REF_SEC) / 2);
}
export function blockTime(block: number): number {
  return REF_SEC + (block - REF_BLOCK) * 2;
}

export const CTF_EXCHANGE = '0x4bfb41d5b3570defd03c39a9a4d8de6bd8b8982e';
export const NEG_RISK_CTF_EXCHANGE = '0xc5d563a36ae78145c45a50134d48a1215220f80a';
