import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { SimulatedChain } from '../../sim/simulate/chain.js';
import { SimulatedVenue, syntheticMarkets } from '../../sim/simulate/venue.js';
import { ChainIndexer } from '../../src/chain/indexer.js';
import { ADDR, readChainFiles, tempDir, waitFor, type Line } from './node.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type TradeFrame = { event_type: string; asset_id: string; price: string; size: string; side: 'BUY' | 'SELL'; transaction_hash: string };

describe('SimulatedChain under the simulated venue, read by the real indexer', () => {
  it('settles printed trades as V1 then V2 exchange logs that the indexer writes with the printed price and size', async () => {
    const start = 79_000_000;
    const chain = new SimulatedChain({ blockMs: 250, startBlock: start, v2FromBlock: start + 10 });
    // Token ids the chain can carry (uint256), in place of the generator's longer ones.
    const markets = syntheticMarkets(3, 8).map((m, i) => ({
      ...m,
      tokens: [`${7100 + i}${'1'.repeat(70)}`, `${7200 + i}${'2'.repeat(70)}`] as [string, string],
    }));
    const venue = await SimulatedVenue.start({ markets, rate: 600, seed: 3, keepSent: true, onTrade: chain.trade, routes: [chain.route] });
    cleanups.push(() => venue.close());
    chain.start();
    cleanups.push(() => chain.stop());
    const ws = new WebSocket(venue.url);
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ assets_ids: markets.flatMap((m) => m.tokens), type: 'market' }));
    cleanups.push(() => ws.close());

    const dir = tempDir('chain-sim');
    const { indexer } = await ChainIndexer.start({
      rpcUrl: `${venue.httpUrl}/rpc`,
      outDir: dir,
      confirmations: 2,
      maxRange: 100,
      rotateSeconds: 1,
      fromBlock: start,
      pollMs: 100,
      log: pino({ level: 'silent' }),
    });
    cleanups.push(() => indexer.stop());
    const fills = (v: 1 | 2): Line[] =>
      readChainFiles(dir)
        .flatMap((f) => f.lines)
        .filter((l) => l.kind === 'log' && l.event === 'OrderFilled' && String(l.exchange).endsWith(`v${v}`));
    await waitFor('V1 and V2 fills written', () => fills(1).length >= 4 && fills(2).length >= 4, 45_000);
    await indexer.stop();

    const files = readChainFiles(dir);
    const logs = files.flatMap((f) => f.lines).filter((l) => l.kind === 'log');
    const written = files.at(-1)!.to;
    // Every log of every block written is there once, in chain order.
    const onChain = chain.blocks.filter((b) => b.number <= written).flatMap((b) => b.logs.map((l, i) => `${b.number}:${i}:${l.transactionHash}`));
    const got = logs.map((l) => `${String(l.block_number)}:${String(l.log_index)}:${String(l.transaction_hash)}`);
    expect(got).toEqual(onChain);
    // V1 before the switch block, V2 from it.
    for (const l of logs) expect(String(l.exchange).endsWith((l.block_number as number) < start + 10 ? 'v1' : 'v2')).toBe(true);

    const trades = new Map(
      venue
        .sent()
        .filter((f) => f.text.includes('"last_trade_price"'))
        .map((f) => JSON.parse(f.text) as TradeFrame)
        .map((t) => [t.transaction_hash, t]),
    );
    const exchanges = new Set<string>(Object.values(ADDR));
    let makers = 0;
    for (const l of logs.filter((x) => x.event === 'OrderFilled')) {
      const args = l.args as Record<string, string>;
      const t = trades.get(String(l.transaction_hash))!;
      expect(t).toBeDefined();
      if (exchanges.has(args.taker!)) continue; // the exchange-side echo
      makers++;
      const shares = String(Math.round(Number(t.size) * 1e6));
      const usdc = String(Math.round(Number(t.price) * Number(t.size) * 1e6));
      const buy = t.side === 'BUY';
      if (String(l.exchange).endsWith('v1')) {
        expect(args).toMatchObject(
          buy
            ? { makerAssetId: t.asset_id, takerAssetId: '0', makerAmountFilled: shares, takerAmountFilled: usdc }
            : { makerAssetId: '0', takerAssetId: t.asset_id, makerAmountFilled: usdc, takerAmountFilled: shares },
        );
      } else {
        expect(args).toMatchObject({
          side: buy ? '1' : '0',
          tokenId: t.asset_id,
          makerAmountFilled: buy ? shares : usdc,
          takerAmountFilled: buy ? usdc : shares,
        });
      }
    }
    // One maker fill per printed trade, beside its echo and OrdersMatched.
    expect(makers).toBe(logs.filter((l) => l.event === 'OrdersMatched').length);
    expect(logs.filter((l) => l.event === 'OrderFilled').length).toBe(2 * makers);
    expect(logs.some((l) => l.event === 'FeeCharged' && String(l.exchange).endsWith('v2'))).toBe(true);
  });
});
