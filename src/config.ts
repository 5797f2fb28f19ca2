import path from 'node:path';
import os from 'node:os';
import { z } from 'zod';

const BYTE_SIZE = /^\d+(\.\d+)?\s*(KB|MB|GB|TB|KiB|MiB|GiB|TiB)$/i;
const UNIT: Record<string, number> = { kb: 1e3, mb: 1e6, gb: 1e9, tb: 1e12, kib: 2 ** 10, mib: 2 ** 20, gib: 2 ** 30, tib: 2 ** 40 };

/** Bytes of a size as DuckDB's memory_limit spells it: KB/MB/GB/TB are powers of 1000, KiB/MiB/GiB/TiB of 1024. */
export function parseByteSize(text: string): number {
  const m = /^(\d+(?:\.\d+)?)\s*([a-z]+)$/i.exec(text.trim());
  const unit = m ? UNIT[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined) throw new Error(`not a size: ${text}`);
  return Math.floor(Number(m[1]) * unit);
}

/**
 * All configuration comes from the environment, read once here and validated.
 * A bad value stops the process at start-up with a message naming the variable.
 */
const EnvSchema = z
  .object({
    PMLAKE_LAKE: z.string().min(1).default('./lake'),
    PMLAKE_STATE: z.string().min(1).default('./state'),
    PORT: z.coerce.number().int().min(0).max(65535).default(8000),
    HOST: z.string().min(1).default('127.0.0.1'),
    LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    PMLAKE_KEY_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9_]{1,16}$/, 'letters, digits and underscores, at most 16')
      .default('pm_'),
    /** Book snapshot cadence in seconds (plus one at every venue `book` message). */
    PMLAKE_SNAPSHOT_SECONDS: z.coerce.number().int().min(1).max(86_400).default(60),
    /**
     * How long files a newer lake version retired stay on disk (src/lake/versions.ts): longer than the longest
     * request, so a download that resolved the older version can read all of it.
     */
    PMLAKE_LAKE_GRACE_SECONDS: z.coerce
      .number()
      .int()
      .min(0)
      .max(30 * 86_400)
      .default(86_400),
    /** An ingest compacts a partition once it holds more than this many small files; 0 never (`pmlake compact`). */
    PMLAKE_COMPACT_SMALL_FILES: z.coerce.number().int().min(0).max(10_000).default(16),
    /** DuckDB resources: a 2-core machine by default. */
    PMLAKE_DUCKDB_THREADS: z.coerce.number().int().min(1).max(256).optional(),
    PMLAKE_DUCKDB_MEMORY: z.string().regex(BYTE_SIZE).default('4GB'),
    /**
     * What one `pmlake ingest` process may hold resident (DuckDB, the book replay, Node) whatever the batch:
     * ingest/memory.ts gives DuckDB a share of it (never more than PMLAKE_DUCKDB_MEMORY) and writes a batch out
     * before its staged rows outgrow it.
     */
    PMLAKE_INGEST_MEMORY: z
      .string()
      .regex(BYTE_SIZE, 'a size such as 4GiB or 600MB')
      .transform(parseByteSize)
      .refine((b) => b >= 512 * 2 ** 20, 'at least 512MiB')
      .default(4 * 2 ** 30),
    /** S3-compatible object storage for exports; unset → files under PMLAKE_STATE/exports behind pmlake's own signed links. */
    PMLAKE_S3_ENDPOINT: z.string().url().optional(),
    PMLAKE_S3_BUCKET: z
      .string()
      .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/)
      .default('pmlake-exports'),
    PMLAKE_S3_REGION: z.string().min(1).default('us-east-1'),
    PMLAKE_S3_ACCESS_KEY_ID: z.string().min(1).default('S3RVER'),
    PMLAKE_S3_SECRET_ACCESS_KEY: z.string().min(1).default('S3RVER'),
    PMLAKE_EXPORT_CONCURRENCY: z.coerce.number().int().min(1).max(16).default(2),
    /** Replays, NDJSON streams and downloads one account may have open at once in a process (src/accounts/streams.ts). */
    PMLAKE_STREAMS_PER_USER: z.coerce.number().int().min(1).max(1000).default(8),
    PMLAKE_EXPORT_RETENTION_HOURS: z.coerce
      .number()
      .int()
      .min(1)
      .max(24 * 365)
      .default(24 * 7),
    /**
     * How long a worker's claim on a running export holds without renewal (renewed every third of it while it
     * builds): a worker that dies (kill -9, a machine lost) hands its job to another one after at most this long.
     */
    PMLAKE_EXPORT_LEASE_SECONDS: z.coerce.number().int().min(2).max(3600).default(30),
    /** Unfinished export uploads untouched this long are swept (parts of interrupted exports). */
    PMLAKE_EXPORT_STALE_UPLOAD_HOURS: z.coerce
      .number()
      .min(1)
      .max(24 * 30)
      .default(24),
    /** HMAC secret of pmlake's own export links (default store); unset → generated once into PMLAKE_STATE. */
    PMLAKE_LINK_SECRET: z.string().min(32).optional(),
    /** HMAC secret for the built-in payment provider's webhooks and for dashboard JWTs. */
    PMLAKE_WEBHOOK_SECRET: z.string().min(16).default('pmlake-local-webhook-secret-change-me'),
    PMLAKE_JWT_SECRET: z.string().min(16).optional(),
    PMLAKE_JWKS_FILE: z.string().min(1).optional(),
    /** Public base URL used in links the service hands out (checkout pages). */
    PMLAKE_PUBLIC_URL: z.string().url().optional(),
    /**
     * Host headers trusted to name this service in links (comma list of `host` or `host:port`). Empty: links
     * never come from a request header (a spoofed Host would otherwise become the checkout link).
     */
    PMLAKE_ALLOWED_HOSTS: z
      .string()
      .default('')
      .transform((s) =>
        s
          .split(',')
          .map((h) => h.trim().toLowerCase())
          .filter(Boolean),
      )
      .pipe(z.array(z.string().regex(/^([a-z0-9-]+(\.[a-z0-9-]+)*|\[[0-9a-f:.]+\])(:\d{1,5})?$/, 'host or host:port'))),
    /**
     * Who takes payments. 'none' (default): checkout answers 503. 'local' is the built-in test provider whose
     * page confirms without any payment: only for demos and tests. 'paddle': Paddle Billing.
     */
    PMLAKE_PAYMENT_PROVIDER: z.enum(['none', 'local', 'paddle']).default('none'),
    PMLAKE_PADDLE_API_URL: z.string().url().default('https://api.paddle.com'),
    PMLAKE_PADDLE_API_KEY: z.string().min(8).optional(),
    /** The notification destination's secret key: enables POST /v1/billing/webhook/paddle. */
    PMLAKE_PADDLE_WEBHOOK_SECRET: z.string().min(16).optional(),
    /** Accepted age of a Paddle-Signature timestamp (Paddle's SDKs use 5 s). */
    PMLAKE_PADDLE_WEBHOOK_TOLERANCE_SECONDS: z.coerce.number().int().min(1).max(3600).default(5),
    /**
     * Limits shared by every replica (request limiter, orders bucket, download rate and burst) in Redis, e.g.
     * redis://127.0.0.1:6379/0; unset → in this process (src/limits/). Unreachable → limited routes answer 503.
     */
    PMLAKE_REDIS_URL: z
      .string()
      .url()
      .refine((u) => /^rediss?:\/\//i.test(u), 'a redis:// or rediss:// URL')
      .optional(),
    /**
     * PostgreSQL shared by every machine, e.g. postgresql://pmlake:secret@db:5432/pmlake: the state (accounts,
     * money, usage, the export queue: src/state/pg-db.ts) of every replica and worker, and the ingest's
     * single-writer lock across machines (an advisory lock); unset → the embedded SQLite file and the lock file.
     */
    PMLAKE_DATABASE_URL: z
      .string()
      .url()
      .refine((u) => /^postgres(ql)?:\/\//i.test(u), 'a postgres:// or postgresql:// URL')
      .optional(),
    /**
     * This API process's name among the replicas sharing one database (stable across its restarts): at start-up
     * it refunds the downloads its own crash cut off, no other replica's. Default: host name and port.
     */
    PMLAKE_REPLICA_ID: z
      .string()
      .regex(/^[A-Za-z0-9._:-]{1,100}$/, 'letters, digits and . _ : - (at most 100)')
      .optional(),
    /** Whether `pmlake serve` also builds exports ('off': only `pmlake worker` processes do). */
    PMLAKE_EMBEDDED_WORKER: z.enum(['on', 'off']).default('on'),
    /** Request rate limiting (60/min per key, 5/min orders). 'off' only for load tests on a private host. */
    PMLAKE_RATE_LIMITS: z.enum(['on', 'off']).default('on'),
    /**
     * Load shedding (src/http/admission.ts): requests of each cost class in flight at once, 0 = unbounded.
     * Defaults for 2 cores: DuckDB scans ('query') and downloads ('stream') bounded, lookups ('cheap') not.
     */
    PMLAKE_CHEAP_CONCURRENCY: z.coerce.number().int().min(0).max(10_000).default(0),
    PMLAKE_QUERY_CONCURRENCY: z.coerce.number().int().min(0).max(256).default(3),
    PMLAKE_STREAM_CONCURRENCY: z.coerce.number().int().min(0).max(256).default(4),
    /**
     * The event loop's share (src/http/admission.ts TurnPacer): while query or stream requests are in flight or
     * waiting, at most this many requests that take no slot (cheap lookups, kept answers) start per turn of the
     * event loop, so the scans' DuckDB completions are handled between batches; 0 = never paced.
     */
    PMLAKE_CHEAP_PER_TURN: z.coerce.number().int().min(0).max(10_000).default(8),
    /** A request waiting longer than this for its class is answered 503 with Retry-After. */
    PMLAKE_QUEUE_TIMEOUT_MS: z.coerce.number().int().min(1).max(600_000).default(5000),
    /** Requests allowed to wait per class; one more is answered 503 at once. */
    PMLAKE_QUEUE_MAX: z.coerce.number().int().min(0).max(100_000).default(256),
    /** The venue's market channel `pmlake record` connects to (docs/capture-format.md). */
    PMLAKE_VENUE_WS_URL: z
      .string()
      .url()
      .regex(/^wss?:\/\//i, 'a ws:// or wss:// URL')
      .default('wss://ws-subscriptions-clob.polymarket.com/ws/market'),
    /** A recorder closes its capture file and starts the next one every this many seconds (wall-clock aligned). */
    PMLAKE_RECORD_ROTATE_SECONDS: z.coerce.number().int().min(1).max(3600).default(60),
    /** The recorder's name in its file names and capture lines; two recorders of one directory set must differ. Default: host name. */
    PMLAKE_RECORDER_ID: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,64}$/, 'letters, digits and . _ - (at most 64)')
      .optional(),
    /** `pmlake ingest --follow`: one lake version per this many seconds at most. */
    PMLAKE_FOLLOW_SECONDS: z.coerce.number().min(0.2).max(3600).default(30),
    /** `pmlake catalogue`: one poll of the whole catalogue per this many seconds (docs/catalogue-format.md). */
    PMLAKE_CATALOGUE_SECONDS: z.coerce.number().min(0.2).max(86_400).default(300),
    /** The venue's Gamma API (markets, events) and CLOB API (markets) the catalogue poller pages through. */
    PMLAKE_GAMMA_URL: z
      .string()
      .url()
      .regex(/^https?:\/\//i, 'an http(s) URL')
      .default('https://gamma-api.polymarket.com'),
    PMLAKE_CLOB_URL: z
      .string()
      .url()
      .regex(/^https?:\/\//i, 'an http(s) URL')
      .default('https://clob.polymarket.com'),
    /** `pmlake chain`: a Polygon JSON-RPC node (docs/chain-format.md); required by that command only. */
    PMLAKE_POLYGON_RPC_URL: z
      .string()
      .url()
      .regex(/^https?:\/\//i, 'an http(s) URL')
      .optional(),
    /** Blocks on top of a block before `pmlake chain` writes it; a reorg within this window is replaced. */
    PMLAKE_CHAIN_CONFIRMATIONS: z.coerce.number().int().min(0).max(10_000).default(32),
    /** `pmlake chain`: the first block when its directory holds no file and no --from-block is given. */
    PMLAKE_CHAIN_FROM_BLOCK: z.coerce.number().int().min(0).optional(),
    /** `pmlake chain`: the widest eth_getLogs range asked (halved while the node refuses, grown back after). */
    PMLAKE_CHAIN_MAX_RANGE: z.coerce.number().int().min(1).max(1_000_000).default(2000),
  })
  .superRefine((e, ctx) => {
    if (e.PMLAKE_PAYMENT_PROVIDER !== 'paddle') return;
    for (const k of ['PMLAKE_PADDLE_API_KEY', 'PMLAKE_PADDLE_WEBHOOK_SECRET'] as const) {
      if (!e[k]) ctx.addIssue({ code: 'custom', path: [k], message: 'required when PMLAKE_PAYMENT_PROVIDER=paddle' });
    }
  });

export type Config = {
  lakeDir: string;
  stateDir: string;
  port: number;
  host: string;
  logLevel: z.infer<typeof EnvSchema>['LOG_LEVEL'];
  keyPrefix: string;
  snapshotSeconds: number;
  lakeGraceSeconds: number;
  compactSmallFiles: number;
  duckdbThreads: number | undefined;
  duckdbMemory: string;
  /** Bytes (PMLAKE_INGEST_MEMORY). */
  ingestMemory: number;
  s3: {
    endpoint: string | undefined;
    bucket: string;
    region: string;
    accessKeyId: string;
    secretAccessKey: string;
  };
  exportConcurrency: number;
  streamsPerUser: number;
  exportRetentionHours: number;
  exportStaleUploadHours: number;
  exportLeaseSeconds: number;
  replicaId: string | undefined;
  embeddedWorker: boolean;
  linkSecret: string | undefined;
  webhookSecret: string;
  jwtSecret: string | undefined;
  jwksFile: string | undefined;
  publicUrl: string | undefined;
  allowedHosts: readonly string[];
  payments: {
    provider: 'none' | 'local' | 'paddle';
    paddle: { apiUrl: string; apiKey: string | undefined; webhookSecret: string | undefined; toleranceSeconds: number };
  };
  rateLimits: boolean;
  /** Redis for limits shared across replicas; undefined → in-process limits. */
  redisUrl: string | undefined;
  /** PostgreSQL shared across machines; undefined → single-machine coordination only. */
  databaseUrl: string | undefined;
  /** The input side: the recorder of the venue's market channel and the following ingest. */
  live: {
    venueWsUrl: string;
    recordRotateSeconds: number;
    recorderId: string;
    followSeconds: number;
    catalogueSeconds: number;
    gammaUrl: string;
    clobUrl: string;
    polygonRpcUrl: string | undefined;
    chainConfirmations: number;
    chainFromBlock: number | undefined;
    chainMaxRange: number;
  };
  admission: {
    classes: Readonly<Record<'cheap' | 'query' | 'stream', { concurrency: number; maxQueue: number }>>;
    queueTimeoutMs: number;
    /** Requests taking no slot started per event-loop turn while a slotted class is busy (0 = unpaced). */
    cheapPerTurn: number;
  };
};

export class ConfigError extends Error {}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = EnvSchema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  return Object.freeze({
    lakeDir: path.resolve(e.PMLAKE_LAKE),
    stateDir: path.resolve(e.PMLAKE_STATE),
    port: e.PORT,
    host: e.HOST,
    logLevel: e.LOG_LEVEL,
    keyPrefix: e.PMLAKE_KEY_PREFIX,
    snapshotSeconds: e.PMLAKE_SNAPSHOT_SECONDS,
    lakeGraceSeconds: e.PMLAKE_LAKE_GRACE_SECONDS,
    compactSmallFiles: e.PMLAKE_COMPACT_SMALL_FILES,
    duckdbThreads: e.PMLAKE_DUCKDB_THREADS,
    duckdbMemory: e.PMLAKE_DUCKDB_MEMORY,
    ingestMemory: e.PMLAKE_INGEST_MEMORY,
    s3: Object.freeze({
      endpoint: e.PMLAKE_S3_ENDPOINT,
      bucket: e.PMLAKE_S3_BUCKET,
      region: e.PMLAKE_S3_REGION,
      accessKeyId: e.PMLAKE_S3_ACCESS_KEY_ID,
      secretAccessKey: e.PMLAKE_S3_SECRET_ACCESS_KEY,
    }),
    exportConcurrency: e.PMLAKE_EXPORT_CONCURRENCY,
    streamsPerUser: e.PMLAKE_STREAMS_PER_USER,
    exportRetentionHours: e.PMLAKE_EXPORT_RETENTION_HOURS,
    exportStaleUploadHours: e.PMLAKE_EXPORT_STALE_UPLOAD_HOURS,
    exportLeaseSeconds: e.PMLAKE_EXPORT_LEASE_SECONDS,
    replicaId: e.PMLAKE_REPLICA_ID,
    embeddedWorker: e.PMLAKE_EMBEDDED_WORKER === 'on',
    linkSecret: e.PMLAKE_LINK_SECRET,
    webhookSecret: e.PMLAKE_WEBHOOK_SECRET,
    jwtSecret: e.PMLAKE_JWT_SECRET,
    jwksFile: e.PMLAKE_JWKS_FILE,
    publicUrl: e.PMLAKE_PUBLIC_URL,
    allowedHosts: Object.freeze(e.PMLAKE_ALLOWED_HOSTS),
    payments: Object.freeze({
      provider: e.PMLAKE_PAYMENT_PROVIDER,
      paddle: Object.freeze({
        apiUrl: e.PMLAKE_PADDLE_API_URL,
        apiKey: e.PMLAKE_PADDLE_API_KEY,
        webhookSecret: e.PMLAKE_PADDLE_WEBHOOK_SECRET,
        toleranceSeconds: e.PMLAKE_PADDLE_WEBHOOK_TOLERANCE_SECONDS,
      }),
    }),
    rateLimits: e.PMLAKE_RATE_LIMITS === 'on',
    redisUrl: e.PMLAKE_REDIS_URL,
    databaseUrl: e.PMLAKE_DATABASE_URL,
    live: Object.freeze({
      venueWsUrl: e.PMLAKE_VENUE_WS_URL,
      recordRotateSeconds: e.PMLAKE_RECORD_ROTATE_SECONDS,
      recorderId:
        e.PMLAKE_RECORDER_ID ??
        os
          .hostname()
          .replace(/[^A-Za-z0-9._-]/g, '-')
          .slice(0, 64),
      followSeconds: e.PMLAKE_FOLLOW_SECONDS,
      catalogueSeconds: e.PMLAKE_CATALOGUE_SECONDS,
      gammaUrl: e.PMLAKE_GAMMA_URL.replace(/\/+$/, ''),
      clobUrl: e.PMLAKE_CLOB_URL.replace(/\/+$/, ''),
      polygonRpcUrl: e.PMLAKE_POLYGON_RPC_URL,
      chainConfirmations: e.PMLAKE_CHAIN_CONFIRMATIONS,
      chainFromBlock: e.PMLAKE_CHAIN_FROM_BLOCK,
      chainMaxRange: e.PMLAKE_CHAIN_MAX_RANGE,
    }),
    admission: Object.freeze({
      classes: Object.freeze({
        cheap: { concurrency: e.PMLAKE_CHEAP_CONCURRENCY, maxQueue: e.PMLAKE_QUEUE_MAX },
        query: { concurrency: e.PMLAKE_QUERY_CONCURRENCY, maxQueue: e.PMLAKE_QUEUE_MAX },
        stream: { concurrency: e.PMLAKE_STREAM_CONCURRENCY, maxQueue: e.PMLAKE_QUEUE_MAX },
      }),
      queueTimeoutMs: e.PMLAKE_QUEUE_TIMEOUT_MS,
      cheapPerTurn: e.PMLAKE_CHEAP_PER_TURN,
    }),
  });
}
