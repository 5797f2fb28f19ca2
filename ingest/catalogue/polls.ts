import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { DuckDBListValue } from '@duckdb/node-api';
import { ensureCatalogStaging } from '../catalog.js';
import { headerLine } from '../detect.js';
import { classifyMetaObjs, dropMetaTables, refuseMetaRecords, stageMetaRecords } from '../metadata.js';
import { ingestSql } from '../metadata/sql.js';
import { makeScratchDir } from '../scratch.js';
import { JSON_CAP, jsonObjectLimit } from '../memory.js';
import { noteLanded, type BatchContext, type SourceHandler } from '../types.js';

/**
 * Catalogue poll files of `pmlake catalogue` (docs/catalogue-format.md). Every page body goes through the metadata
 * handler's SQL (the catalogue as from any metadata file); what each source said about each market becomes an
 * observation, and the observations that differ from the definition in force before them are staged into
 * stg_market_definitions (sql/ingest/catalogue_polls.sql).
 */

/** Issues of one kind named one by one per file; beyond that, one more issue counts the rest. */
const MAX_NAMED = 20;

/** The poller's own text (an error's message, an unknown kind) is told in an issue as a bounded head. */
const head = (v: unknown): string => {
  const t = String(v);
  return t.length > 256 ? `${t.slice(0, 256)}…` : t;
};

type Split = { format: unknown; pages: number; newestMs: number; ended: boolean };

/**
 * Reads the file line by line (a torn last line must not cost the pages before it): `page` lines go to `out` as
 * `{"l":<line>,"o":<line's object>}` for DuckDB, `error` lines and lines that are not JSON become issues.
 */
async function splitLines(ctx: BatchContext, file: string, out: string): Promise<Split> {
  const split: Split = { format: undefined, pages: 0, newestMs: -Infinity, ended: false };
  const fd = fs.openSync(out, 'w');
  try {
    const lines = readline.createInterface({ input: fs.createReadStream(file, 'utf8'), crlfDelay: Infinity });
    let n = 0;
    for await (const raw of lines) {
      n += 1;
      if (raw.trim() === '') continue;
      let o: Record<string, unknown>;
      try {
        const v: unknown = JSON.parse(raw);
        if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new Error('not a JSON object');
        o = v as Record<string, unknown>;
      } catch (e) {
        ctx.issues.push({ file, line: n, message: `invalid JSON line (torn or corrupt): ${(e as Error).message}` });
        if (n === 1) {
          split.format = null;
          return split;
        }
        continue;
      }
      if (n === 1) {
        split.format = o.kind === 'catalogue_poll' ? o.format : null;
        if (split.format !== 1) return split;
        continue;
      }
      if (o.kind === 'page') {
        split.pages += 1;
        const t = typeof o.received_at === 'string' ? Date.parse(o.received_at) : NaN;
        if (t > split.newestMs) split.newestMs = t;
        fs.writeSync(fd, `{"l":${n},"o":${raw}}\n`);
      } else if (o.kind === 'error') {
        const what = head([o.endpoint, o.status].filter((x) => x !== undefined).join(' '));
        ctx.issues.push({
          file,
          line: n,
          message: `catalogue poll error (${what}): ${head(o.message ?? 'no message')}; that endpoint's paging stopped here`,
        });
      } else if (o.kind === 'end') {
        split.ended = true;
      } else {
        ctx.issues.push({ file, line: n, message: `unknown line kind ${head(JSON.stringify(o.kind))}; skipped` });
      }
    }
  } finally {
    fs.closeSync(fd);
  }
  return split;
}

async function rows(ctx: BatchContext, sql: string): Promise<Record<string, unknown>[]> {
  return (await ctx.conn.runAndReadAll(sql)).getRowObjectsJS();
}

/** The page bodies: catalogue records, and this poll's observations (_poll_obs). */
async function stagePages(ctx: BatchContext, file: string, poll: string): Promise<number> {
  const { conn } = ctx;
  await conn.run(ingestSql('catalogue_polls', 'pages'));
  // Each stage holds only what the next needs: the lines, then the page bodies, are the bulk of the file.
  await conn.run('DROP TABLE _poll_lines');
  for (const r of await rows(ctx, ingestSql('catalogue_polls', 'bad_pages'))) {
    ctx.issues.push({ file, line: Number(r.line), message: String(r.message) });
  }
  await conn.run(ingestSql('catalogue_polls', 'objs'));
  await conn.run('CREATE OR REPLACE TEMP TABLE _poll_pages AS SELECT line, received_at FROM _poll_pages');
  await classifyMetaObjs(conn);
  for (const r of await rows(ctx, ingestSql('catalogue_polls', 'unrecognized'))) {
    const n = Number(r.n);
    ctx.issues.push({
      file,
      line: Number(r.line),
      message: 'page record(s) neither a Gamma market/event nor a CLOB market; skipped',
      ...(n > 1 ? { count: n } : {}),
    });
  }
  // A record's ord is its page's line × 1,000,000 plus its place in the page (catalogue_polls.sql `objs`).
  await refuseMetaRecords(ctx, file, (ord) => Math.floor(ord / 1_000_000));
  const mark = Number((await rows(ctx, 'SELECT coalesce(max(rowid), -1) AS m FROM stg_market_records'))[0]!.m);
  await stageMetaRecords(conn);
  await conn.run(ingestSql('catalogue_polls', 'observations'), { poll });
  await dropMetaTables(conn);
  const tokenless = (await conn.runAndReadAll(ingestSql('catalogue_polls', 'tokenless'), { named: MAX_NAMED })).getRowObjectsJS();
  for (const r of tokenless) {
    ctx.issues.push({ file, line: Number(r.line), message: `${String(r.source)} market ${String(r.condition_id)} has no token ids; no definition landed` });
  }
  const rest = Number(tokenless[0]?.total ?? 0) - tokenless.length;
  if (rest > 0) ctx.issues.push({ file, message: `${rest} more market(s) without token ids; no definition landed`, count: rest });
  await conn.run(ingestSql('catalogue_polls', 'drop_tokenless'));
  return mark;
}

/**
 * Keeps the observations that change the definition in force before them, against the lake's rows of these
 * markets and the rows staged from earlier files of the batch (which may be later polls: a row of theirs this
 * poll makes redundant is dropped). Then the catalogue records this file re-sends replace their earlier staged
 * copies (records_superseded; `recordsMark`: the last rowid of stg_market_records before this file's).
 */
async function stageChanges(ctx: BatchContext, recordsMark: number): Promise<number> {
  const { conn } = ctx;
  await conn.run(ingestSql('catalogue_polls', 'prior_staged'));
  const stored = ctx.lake.files('market_definitions');
  if (stored.length > 0) await conn.run(ingestSql('catalogue_polls', 'prior_stored'), { files: new DuckDBListValue(stored) });
  await conn.run(ingestSql('catalogue_polls', 'sequence'));
  const before = Number((await rows(ctx, 'SELECT count(*) AS n FROM stg_market_definitions'))[0]!.n);
  await conn.run(ingestSql('catalogue_polls', 'insert_changes'));
  // The only statements that touch rows of earlier files: both or neither (a failure undoes this file's rows).
  await conn.run('BEGIN TRANSACTION');
  try {
    await conn.run(ingestSql('catalogue_polls', 'drop_redundant'));
    await conn.run(ingestSql('catalogue_polls', 'records_superseded'), { mark: recordsMark });
    await conn.run('COMMIT');
  } catch (err) {
    await conn.run('ROLLBACK');
    throw err;
  }
  const after = Number((await rows(ctx, 'SELECT count(*) AS n FROM stg_market_definitions'))[0]!.n);
  return after - before;
}

async function stagePoll(ctx: BatchContext, file: string): Promise<void> {
  const dir = makeScratchDir(ctx.lakeDir, 'catalogue');
  const { conn } = ctx;
  try {
    const pagesFile = path.join(dir, 'pages.jsonl');
    const split = await splitLines(ctx, file, pagesFile);
    if (split.format !== 1) {
      // Like a capture file of a later format: not landed and not in the ledger, so a newer ingest can land it.
      const what =
        split.format === null
          ? 'the first line is not a catalogue_poll header'
          : `format ${JSON.stringify(split.format)} is not supported (this ingest reads format 1)`;
      throw Object.assign(new Error(`catalogue poll file: ${what}, docs/catalogue-format.md`), { line: 1 });
    }
    if (!split.ended) ctx.issues.push({ file, message: 'catalogue poll file has no end line (torn); its pages landed' });
    ctx.counts.catalogue_pages = (ctx.counts.catalogue_pages ?? 0) + split.pages;
    if (split.pages === 0) return;
    await conn.run(
      `CREATE OR REPLACE TEMP TABLE _poll_lines AS
       SELECT (json->>'l')::BIGINT AS l, json->'o' AS o
       FROM read_json_objects($f, format = 'newline_delimited', maximum_object_size = $max)`,
      { f: pagesFile, max: jsonObjectLimit(pagesFile, JSON_CAP) },
    );
    const recordsMark = await stagePages(ctx, file, path.basename(file));
    const obs = Number((await rows(ctx, 'SELECT count(*) AS n FROM _poll_obs'))[0]!.n);
    ctx.counts.catalogue_observations = (ctx.counts.catalogue_observations ?? 0) + obs;
    const staged = await stageChanges(ctx, recordsMark);
    ctx.log.debug({ file, pages: split.pages, observations: obs, definitions_staged: staged }, 'catalogue poll staged');
    noteLanded(ctx, 'catalogue', split.newestMs);
  } finally {
    for (const t of ['_poll_lines', '_poll_pages', '_poll_obs', '_defs_prior', '_defs_seq']) await conn.run(`DROP TABLE IF EXISTS ${t}`);
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Catalogue poll files of `pmlake catalogue` (docs/catalogue-format.md): the first line names the format. */
export const cataloguePollHandler: SourceHandler = {
  kind: 'metadata',
  name: 'catalogue poll files (pmlake catalogue)',
  detect: (_file, head) => headerLine(head)?.kind === 'catalogue_poll',
  async stage(ctx, file) {
    await ensureCatalogStaging(ctx.conn);
    await stagePoll(ctx, file);
  },
};
