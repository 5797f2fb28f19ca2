/**
 * The state schema, migration by migration, applied in order once each: one list, from which both backends are
 * migrated (SQLITE_MIGRATIONS for the embedded file, PG_MIGRATIONS for PostgreSQL), so one id names one change in
 * both. Where the dialects differ the text says so in place (`${d.…}`). Times stay ISO-8601 text (fixed width, so
 * they compare as they sort in SQLite), amounts integer cents (BIGINT in PostgreSQL), flags integers; `seq`
 * columns count up by themselves. Append new entries; never edit an applied one: the SQL each dialect gets must
 * stay the same text, since a database records only the ids it applied.
 */
export type Migration = { id: number; name: string; sql: string };

/** What differs between the two backends' SQL. */
type Dialect = {
  /** Counts and cents: SQLite's INTEGER is 64-bit already; PostgreSQL's is 32-bit. */
  bigint: string;
  double: string;
  /** A row number that counts up by itself: the append-only tables' order. */
  seq: string;
  /** The body of a trigger refusing the change: SQLite raises in the trigger itself, PostgreSQL calls a function. */
  appendOnly(table: string): string;
  /** `text` for this dialect only, '' for the other. */
  sqlite(text: string): string;
  pg(text: string): string;
};

const SQLITE: Dialect = {
  bigint: 'INTEGER',
  double: 'REAL',
  seq: 'INTEGER PRIMARY KEY AUTOINCREMENT',
  appendOnly: (table) => `BEGIN SELECT RAISE(ABORT, '${table} is append-only'); END;`,
  sqlite: (text) => text,
  pg: () => '',
};

const PG: Dialect = {
  bigint: 'BIGINT',
  double: 'DOUBLE PRECISION',
  seq: 'BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY',
  appendOnly: () => 'FOR EACH ROW EXECUTE FUNCTION pmlake_append_only();',
  sqlite: () => '',
  pg: (text) => text,
};

const migrations = (d: Dialect): Migration[] => [
  {
    id: 1,
    name: 'users and api keys',
    sql: `
      CREATE TABLE users (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL UNIQUE,
        plan TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
      CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users(id),
        name TEXT NOT NULL,
        key_prefix TEXT NOT NULL,
        key_hash TEXT NOT NULL UNIQUE,
        scopes TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_used_at TEXT,
        expires_at TEXT,
        revoked_at TEXT
      );
      CREATE INDEX api_keys_user ON api_keys(user_id);
    `,
  },
  {
    // Accounts (helper E, ids 100–199): subscriptions, the credit ledger, checkouts, webhook events, orders,
    // download history (the usage meter's tickets) and per-day request counts.
    id: 100,
    name: 'accounts: subscriptions, ledger, checkouts, orders, pulls, usage',
    sql: `
      ALTER TABLE api_keys ADD COLUMN scheduled_revoke_at TEXT;
      CREATE TABLE subscriptions (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users(id),
        tier TEXT NOT NULL,
        billing_period TEXT NOT NULL,
        status TEXT NOT NULL,
        funded_by TEXT NOT NULL,
        current_period_start TEXT NOT NULL,
        current_period_end TEXT NOT NULL,
        cancel_at_period_end INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        canceled_at TEXT
      );
      CREATE INDEX subscriptions_user ON subscriptions(user_id, current_period_end);
      CREATE TABLE credit_accounts (
        user_id TEXT PRIMARY KEY REFERENCES users(id),
        balance_cents ${d.bigint} NOT NULL DEFAULT 0 CHECK (balance_cents >= 0),
        lifetime_credits_cents ${d.bigint} NOT NULL DEFAULT 0,
        lifetime_usage_cents ${d.bigint} NOT NULL DEFAULT 0,
        lifetime_refunds_cents ${d.bigint} NOT NULL DEFAULT 0
      );
      CREATE TABLE ledger (
        seq ${d.seq},
        id TEXT NOT NULL UNIQUE,
        user_id TEXT NOT NULL REFERENCES users(id),
        type TEXT NOT NULL,
        amount_cents ${d.bigint} NOT NULL,
        balance_after_cents ${d.bigint} NOT NULL,
        status TEXT NOT NULL,
        description TEXT NOT NULL,
        reference TEXT,
        metadata TEXT,
        created_at TEXT NOT NULL
      );
      CREATE INDEX ledger_user ON ledger(user_id, seq);
      ${d.pg(`CREATE FUNCTION pmlake_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END $$;`)}
      -- A SQLite trigger fires on one event: two of them where PostgreSQL has one.
      ${d.sqlite(`CREATE TRIGGER ledger_append_only_update BEFORE UPDATE ON ledger ${d.appendOnly('ledger')}
      CREATE TRIGGER ledger_append_only_delete BEFORE DELETE ON ledger ${d.appendOnly('ledger')}`)}
      ${d.pg(`CREATE TRIGGER ledger_append_only BEFORE UPDATE OR DELETE ON ledger ${d.appendOnly('ledger')}`)}
      CREATE TABLE checkouts (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users(id),
        provider TEXT NOT NULL,
        kind TEXT NOT NULL,
        amount_cents ${d.bigint} NOT NULL,
        tier TEXT,
        billing_period TEXT,
        success_url TEXT NOT NULL,
        cancel_url TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        completed_at TEXT
      );
      CREATE INDEX checkouts_user ON checkouts(user_id, created_at);
      CREATE TABLE webhook_events (
        provider TEXT NOT NULL,
        event_id TEXT NOT NULL,
        type TEXT NOT NULL,
        outcome TEXT NOT NULL,
        received_at TEXT NOT NULL,
        PRIMARY KEY (provider, event_id)
      );
      CREATE TABLE orders (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users(id),
        idempotency_key TEXT,
        total_cost_cents ${d.bigint} NOT NULL,
        minimum_applied INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        UNIQUE (user_id, idempotency_key)
      );
      CREATE INDEX orders_user ON orders(user_id, created_at);
      CREATE TABLE order_items (
        id TEXT PRIMARY KEY,
        order_id TEXT NOT NULL REFERENCES orders(id),
        position INTEGER NOT NULL,
        market_id TEXT NOT NULL,
        series_id TEXT,
        data_type TEXT NOT NULL,
        format TEXT NOT NULL,
        timeframe TEXT,
        start_date TEXT,
        end_date TEXT,
        record_count ${d.bigint},
        size_bytes ${d.bigint},
        cost_cents ${d.bigint} NOT NULL,
        status TEXT NOT NULL,
        expires_at TEXT NOT NULL
      );
      CREATE INDEX order_items_order ON order_items(order_id, position);
      CREATE TABLE pulls (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users(id),
        key_id TEXT,
        kind TEXT NOT NULL,
        dataset TEXT NOT NULL,
        description TEXT NOT NULL,
        market_id TEXT,
        format TEXT,
        file_name TEXT,
        timeframe TEXT,
        start_date TEXT,
        end_date TEXT,
        status TEXT NOT NULL,
        reserved_bytes ${d.bigint} NOT NULL,
        bytes ${d.bigint},
        rows ${d.bigint},
        reason TEXT,
        created_at TEXT NOT NULL,
        finished_at TEXT
      );
      CREATE INDEX pulls_user_created ON pulls(user_id, created_at);
      CREATE TABLE usage_daily (
        user_id TEXT NOT NULL,
        key_id TEXT NOT NULL,
        day TEXT NOT NULL,
        requests ${d.bigint} NOT NULL,
        PRIMARY KEY (user_id, key_id, day)
      );
    `,
  },
  {
    id: 200,
    name: 'export jobs',
    sql: `
      CREATE TABLE export_jobs (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users(id),
        idempotency_key TEXT NOT NULL,
        status TEXT NOT NULL,
        spec TEXT NOT NULL,
        format TEXT NOT NULL,
        file_name TEXT NOT NULL,
        object_key TEXT,
        upload_id TEXT,
        record_count ${d.bigint},
        size_bytes ${d.bigint},
        rows_written ${d.bigint} NOT NULL DEFAULT 0,
        bytes_written ${d.bigint} NOT NULL DEFAULT 0,
        total_rows ${d.bigint},
        cost ${d.double},
        error TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        started_at TEXT,
        completed_at TEXT,
        expires_at TEXT,
        UNIQUE (user_id, idempotency_key)
      );
      CREATE INDEX export_jobs_user_created ON export_jobs(user_id, created_at);
      CREATE INDEX export_jobs_status ON export_jobs(status);
    `,
  },
  {
    // A hosted provider's own id for a checkout (Paddle's txn_…): its webhook must name the same transaction.
    id: 101,
    name: 'checkouts: provider reference',
    sql: `
      ALTER TABLE checkouts ADD COLUMN provider_ref TEXT;
      CREATE UNIQUE INDEX checkouts_provider_ref ON checkouts(provider, provider_ref) WHERE provider_ref IS NOT NULL;
    `,
  },
  {
    // Account lifecycle (data export, privacy log, deletion). The privacy log is append-only: an event's
    // what and when can never change or vanish; only ip_hash and user_agent may be cleared, by a deletion.
    id: 300,
    name: 'account lifecycle: privacy events, deletion requests',
    sql: `
      ALTER TABLE users ADD COLUMN deleted_at TEXT;
      CREATE TABLE privacy_events (
        seq ${d.seq},
        id TEXT NOT NULL UNIQUE,
        user_id TEXT NOT NULL REFERENCES users(id),
        event TEXT NOT NULL,
        metadata TEXT NOT NULL,
        ip_hash TEXT,
        user_agent TEXT,
        created_at TEXT NOT NULL
      );
      CREATE INDEX privacy_events_user ON privacy_events(user_id, seq);
      CREATE TRIGGER privacy_events_append_only_update BEFORE UPDATE OF seq, id, user_id, event, metadata, created_at ON privacy_events
        ${d.appendOnly('privacy_events')}
      CREATE TRIGGER privacy_events_append_only_delete BEFORE DELETE ON privacy_events ${d.appendOnly('privacy_events')}
      CREATE TABLE account_deletion_requests (
        id TEXT PRIMARY KEY,
        user_id TEXT NOT NULL REFERENCES users(id),
        token_hash TEXT NOT NULL UNIQUE,
        reason TEXT,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        resolved_at TEXT
      );
      CREATE INDEX account_deletion_requests_user ON account_deletion_requests(user_id, status);
    `,
  },
  {
    // Exports on a shared queue: a running job is held by one worker until its lease ends; a worker that dies
    // (kill -9) stops renewing it and another one takes the job over (src/exports/queue.ts). PostgreSQL also gets
    // what only a shared database needs: the change notifications the principal caches listen to (./pg-db.ts).
    id: 400,
    name: `export jobs: worker leases${d.pg('; change notifications')}`,
    sql: `
      ALTER TABLE export_jobs ADD COLUMN worker TEXT;
      ALTER TABLE export_jobs ADD COLUMN lease_until TEXT;
      CREATE INDEX export_jobs_claim ON export_jobs(status, created_at);
      ${d.pg(`
      -- Who a key belongs to and what it may do: any change notifies every process's principal cache at commit.
      -- last_used_at is informational and batched: not listed, so the touches do not empty the caches.
      CREATE FUNCTION pmlake_state_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_notify('pmlake_state', ''); RETURN NULL; END $$;
      CREATE TRIGGER users_changed AFTER INSERT OR UPDATE OR DELETE ON users FOR EACH STATEMENT EXECUTE FUNCTION pmlake_state_changed();
      CREATE TRIGGER subscriptions_changed AFTER INSERT OR UPDATE OR DELETE ON subscriptions FOR EACH STATEMENT EXECUTE FUNCTION pmlake_state_changed();
      CREATE TRIGGER api_keys_changed AFTER DELETE OR UPDATE OF user_id, key_hash, scopes, expires_at, revoked_at, scheduled_revoke_at ON api_keys
        FOR EACH STATEMENT EXECUTE FUNCTION pmlake_state_changed();`)}
    `,
  },
  {
    // Deletion holds: an erased address's SHA-256 and when it was erased (dashboard tokens issued before then are
    // refused: src/accounts/auth.ts), and the accounts whose export files are still to be removed from the
    // export store (src/exports/service.ts). Accounts deleted before this migration have files to remove too.
    id: 500,
    name: 'account deletion: erased addresses, export purges',
    sql: `
      CREATE TABLE account_erasures (
        email_hash TEXT PRIMARY KEY,
        erased_at TEXT NOT NULL
      );
      CREATE TABLE export_purges (
        user_id TEXT PRIMARY KEY REFERENCES users(id),
        requested_at TEXT NOT NULL
      );
      INSERT INTO export_purges (user_id, requested_at) SELECT id, deleted_at FROM users WHERE deleted_at IS NOT NULL;
    `,
  },
  {
    // The ingest queue (ingest/queue/): inputs of one lake (its id, ingest/ledger.ts lakeIdentity) by content
    // hash, in the order they are to land (`seq`), taken by `pmlake ingest --worker` processes under leases as
    // export jobs are. Status: queued → running → done | failed; `report` holds the item's costs (JSON).
    id: 600,
    name: 'ingest queue',
    sql: `
      CREATE TABLE ingest_queue (
        seq ${d.seq},
        lake TEXT NOT NULL,
        sha256 TEXT NOT NULL,
        path TEXT NOT NULL,
        bytes ${d.bigint} NOT NULL,
        handler TEXT NOT NULL,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        worker TEXT,
        lease_until TEXT,
        error TEXT,
        report TEXT,
        enqueued_at TEXT NOT NULL,
        started_at TEXT,
        completed_at TEXT,
        UNIQUE (lake, sha256)
      );
      CREATE INDEX ingest_queue_claim ON ingest_queue(lake, status, seq);
    `,
  },
];

export const SQLITE_MIGRATIONS = migrations(SQLITE);
export const PG_MIGRATIONS = migrations(PG);
