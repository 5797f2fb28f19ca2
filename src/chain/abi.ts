import { AbiEventSignatureNotFoundError, decodeEventLog, parseAbi, type Hex } from 'viem';

/**
 * Every event the venue's four exchange contracts emit, from their Solidity sources:
 * V1 `Polymarket/ctf-exchange` src/exchange/interfaces/{ITrading,IFees,IAuth,IPausable,IRegistry}.sol and
 * mixins/PolyFactoryHelper.sol (NegRiskCtfExchange is that CTFExchange, `Polymarket/neg-risk-ctf-adapter`);
 * V2 `ctf-exchange-v2` src/exchange/interfaces/{ITrading,IFees,IAuth,IPausable,ISignatures,IUserPausable}.sol,
 * emitted for trading by mixins/Events.sol in assembly with the same layout (docs/chain-v2.md).
 */
export const V1_EVENTS = parseAbi([
  'event OrderFilled(bytes32 indexed orderHash, address indexed maker, address indexed taker, uint256 makerAssetId, uint256 takerAssetId, uint256 makerAmountFilled, uint256 takerAmountFilled, uint256 fee)',
  'event OrdersMatched(bytes32 indexed takerOrderHash, address indexed takerOrderMaker, uint256 makerAssetId, uint256 takerAssetId, uint256 makerAmountFilled, uint256 takerAmountFilled)',
  'event OrderCancelled(bytes32 indexed orderHash)',
  'event FeeCharged(address indexed receiver, uint256 tokenId, uint256 amount)',
  'event TokenRegistered(uint256 indexed token0, uint256 indexed token1, bytes32 indexed conditionId)',
  'event TradingPaused(address indexed pauser)',
  'event TradingUnpaused(address indexed pauser)',
  'event NewAdmin(address indexed newAdminAddress, address indexed admin)',
  'event NewOperator(address indexed newOperatorAddress, address indexed admin)',
  'event RemovedAdmin(address indexed removedAdmin, address indexed admin)',
  'event RemovedOperator(address indexed removedOperator, address indexed admin)',
  'event ProxyFactoryUpdated(address indexed oldProxyFactory, address indexed newProxyFactory)',
  'event SafeFactoryUpdated(address indexed oldSafeFactory, address indexed newSafeFactory)',
]);

/** V2's `side` is Solidity's `enum Side { BUY, SELL }`, which the ABI encodes as uint8. */
export const V2_EVENTS = parseAbi([
  'event OrderFilled(bytes32 indexed orderHash, address indexed maker, address indexed taker, uint8 side, uint256 tokenId, uint256 makerAmountFilled, uint256 takerAmountFilled, uint256 fee, bytes32 builder, bytes32 metadata)',
  'event OrdersMatched(bytes32 indexed takerOrderHash, address indexed takerOrderMaker, uint8 side, uint256 tokenId, uint256 makerAmountFilled, uint256 takerAmountFilled)',
  'event FeeCharged(address indexed receiver, uint256 amount)',
  'event FeeReceiverUpdated(address indexed feeReceiver)',
  'event MaxFeeRateUpdated(uint256 maxFeeRate)',
  'event OrderPreapproved(bytes32 indexed orderHash)',
  'event OrderPreapprovalInvalidated(bytes32 indexed orderHash)',
  'event UserPaused(address indexed user, uint256 effectivePauseBlock)',
  'event UserUnpaused(address indexed user)',
  'event UserPauseBlockIntervalUpdated(uint256 oldInterval, uint256 newInterval)',
  'event TradingPaused(address indexed pauser)',
  'event TradingUnpaused(address indexed pauser)',
  'event NewAdmin(address indexed newAdminAddress, address indexed admin)',
  'event NewOperator(address indexed newOperatorAddress, address indexed admin)',
  'event RemovedAdmin(address indexed removedAdmin, address indexed admin)',
  'event RemovedOperator(address indexed removedOperator, address indexed admin)',
]);

export type ExchangeName = 'ctf_v1' | 'negrisk_v1' | 'ctf_v2' | 'negrisk_v2';
export type Exchange = { address: Hex; exchange: ExchangeName; version: 1 | 2 };

/** The venue's exchange contracts on Polygon (lower-case), as docs/chain-format.md names them. */
export const EXCHANGES: readonly Exchange[] = [
  { address: '0x4bfb41d5b3570defd03c39a9a4d8de6bd8b8982e', exchange: 'ctf_v1', version: 1 },
  { address: '0xc5d563a36ae78145c45a50134d48a1215220f80a', exchange: 'negrisk_v1', version: 1 },
  { address: '0xe111180000d2663c0091e4f400237545b87b996b', exchange: 'ctf_v2', version: 2 },
  { address: '0xe2222d279d744050d28e00520010520000310f59', exchange: 'negrisk_v2', version: 2 },
];

export const EXCHANGE_ADDRESSES: readonly Hex[] = EXCHANGES.map((e) => e.address);

export function exchangeOf(address: string): Exchange | undefined {
  const a = address.toLowerCase();
  return EXCHANGES.find((e) => e.address === a);
}

export type DecodedArgs = Record<string, string>;
/** A decoded log; `event: null` for a topic no ABI knows, with `error` when a known topic did not decode. */
export type Decoded = { event: string; args: DecodedArgs } | { event: null; args: null; error?: string };

/**
 * Decodes one log of an exchange with its version's ABI. Arguments come out as the chain-file format keeps them:
 * integers as decimal strings (uint256 exceeds 2^53; uint8 too, for one rule), addresses and bytes lower-case hex.
 */
export function decodeExchangeLog(version: 1 | 2, topics: readonly Hex[], data: Hex): Decoded {
  if (topics.length === 0) return { event: null, args: null };
  try {
    const d = decodeEventLog({ abi: version === 1 ? V1_EVENTS : V2_EVENTS, topics: topics as [Hex, ...Hex[]], data, strict: true });
    const args: DecodedArgs = {};
    for (const [k, v] of Object.entries(d.args as Record<string, unknown>)) args[k] = typeof v === 'string' ? v.toLowerCase() : String(v);
    return { event: d.eventName, args };
  } catch (err) {
    if (err instanceof AbiEventSignatureNotFoundError) return { event: null, args: null };
    return { event: null, args: null, error: (err as Error).message.split('\n')[0] ?? 'undecodable' };
  }
}
