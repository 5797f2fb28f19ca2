-- Identifiers and text from outside, as the ingest accepts them (lake/README.md, "What the ingest accepts"). A value
-- the venue cannot have sent (a token id of ten million digits, a question of megabytes) is an issue of its file and
-- lands in no derived data set. Run by ingest/identifiers.ts on the staging connection before a handler stages.
-- Each macro is true for a value present and refused; NULL (absent) is never refused here: each format's own rules
-- say what an absent field means. strlen (bytes) comes first: it costs nothing, and AND gives the pattern only the
-- values it let through. The tape checks each distinct value of a chunk once (ws_ids.sql), never every message.

-- A token id is an ERC-1155 id, a uint256 in decimal: 1 to 78 digits, at most 2^256 - 1. That maximum has 78 digits,
-- so a 78-digit id is compared with it as text (digit strings of one length order as their numbers).
CREATE OR REPLACE TEMP MACRO pm_bad_token(x) AS x IS NOT NULL AND NOT (
  strlen(x) BETWEEN 1 AND 78 AND regexp_full_match(x, '[0-9]+')
  AND (strlen(x) < 78 OR x <= '115792089237316195423570985008687907853269984665640564039457584007913129639935'));

-- A condition id is a bytes32: 0x and 64 hex digits (either case; the catalogue stores it lower-cased).
CREATE OR REPLACE TEMP MACRO pm_bad_condition(x) AS x IS NOT NULL AND NOT (strlen(x) = 66 AND regexp_full_match(x, '0x[0-9a-fA-F]{64}'));

-- A Gamma market id (and the catalogue CSV's market_id) is a decimal of 1 to 17 digits: a derived id is '9' and 17
-- digits (ingest/catalog.ts), so no venue id can take its form.
CREATE OR REPLACE TEMP MACRO pm_bad_market_id(x) AS x IS NOT NULL AND NOT (strlen(x) BETWEEN 1 AND 17 AND regexp_full_match(x, '[0-9]+'));

-- Text, by what it is: a name (hashes, sides, event types, slugs, labels, ids of other kinds, categories, recorder
-- ids) at most 256 bytes; a question at most 4 KiB; a description at most 64 KiB.
CREATE OR REPLACE TEMP MACRO pm_long_name(x) AS coalesce(strlen(x) > 256, false);
CREATE OR REPLACE TEMP MACRO pm_long_question(x) AS coalesce(strlen(x) > 4096, false);
CREATE OR REPLACE TEMP MACRO pm_long_text(x) AS coalesce(strlen(x) > 65536, false);

-- A list of outcomes, prices or token ids: at most 64 entries (a market of the venue has two), names within bounds.
CREATE OR REPLACE TEMP MACRO pm_long_list(l) AS coalesce(len(l) > 64, false);
CREATE OR REPLACE TEMP MACRO pm_bad_names(l) AS pm_long_list(l) OR coalesce(list_bool_or(list_transform(l, v -> pm_long_name(v))), false);
-- Token lists: an empty id is the old AMM markets' "no tradable token", read as no tokens (metadata.sql), not refused.
CREATE OR REPLACE TEMP MACRO pm_bad_tokens(l) AS pm_long_list(l)
  OR coalesce(list_bool_or(list_transform(l, v -> v <> '' AND pm_bad_token(v))), false);

-- A Gamma series (an event's series[]): its slug, ticker, id, title and recurrence are names, its description text.
CREATE OR REPLACE TEMP MACRO pm_bad_series(s) AS pm_long_name(s->>'slug') OR pm_long_name(s->>'ticker') OR pm_long_name(s->>'id')
  OR pm_long_name(s->>'title') OR pm_long_name(s->>'recurrence') OR pm_long_text(s->>'description');

-- A row of the catalogue CSV (ingest/metadata.ts: _meta_csv); outcomes and prices are JSON arrays in text, read as
-- pm_str_list and pm_num_list read them (ingest/catalog.ts).
CREATE OR REPLACE TEMP MACRO pm_bad_csv_row(market_id, question, category, outcomes, outcome_prices) AS
  pm_bad_market_id(nullif(trim(market_id), '')) OR pm_long_question(question) OR pm_long_name(category)
  OR pm_bad_names(TRY_CAST(TRY_CAST(outcomes AS JSON) AS VARCHAR[])) OR pm_long_list(TRY_CAST(TRY_CAST(outcome_prices AS JSON) AS DOUBLE[]));
