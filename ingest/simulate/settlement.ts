import fs from 'node:fs';
import path from 'node:path';
import { blockAt, blockTime, CTF_EXCHANGE } from '../generate/format.js';
import { Rng } from '../generate/prng.js';
import type { SimTrade } from './feed.js';

/**
 * A stand-in for the chain under the simulated venue: each printed trade settles as one maker `OrderFilled` in the
 * generator's fills format (ingest/README.md "Fills"), written to JSON lines files that are cut every `rotateSeconds`
 * and put into place by rename, as a chain indexer's would be, so `ingest --follow` lands trades — and with them
 * candles — beside the recorded tape. The demo's until the chain indexer exists; the maker sits opposite the taker
 * in the traded token, amounts are exact 6-decimal integers (price × shares on the grid).
 */
export class SimulatedSettlement {
  private lines: string[] = [];
  private logIndex = 0;
  private lastBlock = -1;
  private readonly timer: NodeJS.Timeout;
  private readonly rng: Rng;

  constructor(
    private readonly dir: string,
    rotateSeconds: number,
    seed = 1,
  ) {
    fs.mkdirSync(dir, { recursive: true });
    this.rng = new Rng(seed, 'settlement');
    this.timer = setInterval(() => this.flush(), rotateSeconds * 1000);
    this.timer.unref();
  }

  /** The venue's `onTrade`. */
  readonly trade = (t: SimTrade): void => {
    const block = blockAt(Math.floor(t.ms / 1000));
    if (block !== this.lastBlock) this.logIndex = 0;
    this.lastBlock = block;
    this.logIndex += 1 + this.rng.int(3);
    const shares = t.cents * 10_000;
    const usdc = t.milli * t.cents * 10;
    // The maker sells the token to a buying taker (gives shares, gets USDC), or buys it from a selling one.
    const [makerAsset, takerAsset, makerAmt, takerAmt] = t.takerBuys ? [t.tokenId, '0', shares, usdc] : ['0', t.tokenId, usdc, shares];
    this.lines.push(
      `{"event":"OrderFilled","block_number":${block},"block_timestamp":${blockTime(block)},"transaction_hash":"${t.transactionHash}","log_index":${this.logIndex},"contract":"${CTF_EXCHANGE}","order_hash":"0x${this.rng.hex(64)}","maker":"0x${this.rng.hex(40)}","taker":"0x${this.rng.hex(40)}","maker_asset_id":"${makerAsset}","taker_asset_id":"${takerAsset}","maker_amount_filled":"${makerAmt}","taker_amount_filled":"${takerAmt}","fee":"0"}`,
    );
  };

  /** Writes what settled since the last cut as one closed file (dot-named while written, then renamed). */
  flush(): void {
    if (this.lines.length === 0) return;
    const text = `${this.lines.join('\n')}\n`;
    this.lines = [];
    const name = `fills-${new Date().toISOString().replace(/[-:.]/g, '')}.jsonl`;
    const open = path.join(this.dir, `.${name}`);
    fs.writeFileSync(open, text);
    const fd = fs.openSync(open, 'r');
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fs.renameSync(open, path.join(this.dir, name));
  }

  close(): void {
    clearInterval(this.timer);
    this.flush();
  }
}
