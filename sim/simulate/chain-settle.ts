import { encodeAbiParameters, encodeEventTopics, type AbiEvent, type Hex } from 'viem';
import { EXCHANGES, V1_EVENTS, V2_EVENTS } from '../../src/chain/abi.js';
import type { Rng } from '../generate/prng.js';
import type { SimTrade } from './feed.js';

/** A log as a contract emits it (the node adds block, transaction and index fields). */
export type SimLog = { address: Hex; topics: Hex[]; data: Hex; transactionHash: Hex };

type Ev1 = (typeof V1_EVENTS)[number];
type Ev2 = (typeof V2_EVENTS)[number];

function encode(abi: readonly (Ev1 | Ev2)[], name: string, indexed: Record<string, unknown>, values: unknown[], address: Hex, tx: Hex): SimLog {
  const item: AbiEvent = abi.find((e) => e.name === name)!;
  const topics = encodeEventTopics({ abi: [item], eventName: item.name, args: indexed } as Parameters<typeof encodeEventTopics>[0]) as Hex[];
  const data = encodeAbiParameters(
    item.inputs.filter((i) => !i.indexed),
    values,
  );
  return { address, topics, data, transactionHash: tx };
}

const ZERO32: Hex = `0x${'0'.repeat(64)}`;

/**
 * The logs one printed trade leaves on chain, as the exchange contracts emit them for a taker matched against one
 * maker: the maker's `OrderFilled` (taker = the taker order's maker), the taker order's own `OrderFilled` whose taker
 * is the exchange itself (the echo), then `OrdersMatched`; in V2 with `side`/`tokenId` and the taker's fee charged
 * (`FeeCharged` before the echo, as Trading.sol emits it). Amounts are exact 6-decimal integers: price × shares
 * on the grid, as the venue printed it.
 */
export function tradeLogs(t: SimTrade, version: 1 | 2, negRisk: boolean, rng: Rng): SimLog[] {
  const ex = EXCHANGES.find((e) => e.version === version && e.exchange.startsWith(negRisk ? 'negrisk' : 'ctf'))!;
  const tx = t.transactionHash as Hex;
  const shares = BigInt(t.cents * 10_000);
  const usdc = BigInt(t.milli * t.cents * 10);
  const token = BigInt(t.tokenId);
  const maker = `0x${rng.hex(40)}` as Hex;
  const taker = `0x${rng.hex(40)}` as Hex;
  const makerHash = `0x${rng.hex(64)}` as Hex;
  const takerHash = `0x${rng.hex(64)}` as Hex;
  // The maker sells the token to a buying taker (gives shares, gets collateral), or buys it from a selling one.
  const [makerGives, makerGets] = t.takerBuys ? [shares, usdc] : [usdc, shares];
  if (version === 1) {
    const [makerAsset, takerAsset] = t.takerBuys ? [token, 0n] : [0n, token];
    return [
      encode(V1_EVENTS, 'OrderFilled', { orderHash: makerHash, maker, taker }, [makerAsset, takerAsset, makerGives, makerGets, 0n], ex.address, tx),
      encode(
        V1_EVENTS,
        'OrderFilled',
        { orderHash: takerHash, maker: taker, taker: ex.address },
        [takerAsset, makerAsset, makerGets, makerGives, 0n],
        ex.address,
        tx,
      ),
      encode(
        V1_EVENTS,
        'OrdersMatched',
        { takerOrderHash: takerHash, takerOrderMaker: taker },
        [takerAsset, makerAsset, makerGets, makerGives],
        ex.address,
        tx,
      ),
    ];
  }
  const makerSide = t.takerBuys ? 1 : 0;
  const takerSide = 1 - makerSide;
  const fee = usdc / 100n;
  return [
    encode(V2_EVENTS, 'OrderFilled', { orderHash: makerHash, maker, taker }, [makerSide, token, makerGives, makerGets, 0n, ZERO32, ZERO32], ex.address, tx),
    ...(fee > 0n ? [encode(V2_EVENTS, 'FeeCharged', { receiver: `0x${'fee'.padEnd(40, '0')}` }, [fee], ex.address, tx)] : []),
    encode(
      V2_EVENTS,
      'OrderFilled',
      { orderHash: takerHash, maker: taker, taker: ex.address },
      [takerSide, token, makerGets, makerGives, fee, ZERO32, ZERO32],
      ex.address,
      tx,
    ),
    encode(V2_EVENTS, 'OrdersMatched', { takerOrderHash: takerHash, takerOrderMaker: taker }, [takerSide, token, makerGets, makerGives], ex.address, tx),
  ];
}
