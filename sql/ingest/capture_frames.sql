-- A capture file's lines (docs/capture-format.md) → its events (_cap_ev), its frames (_cap_fr), the assets each
-- connection subscribed to (_cap_subs) and the connections lost (_cap_disc), both carried over the chunks of one file. Input: _cap_ln(line, recv_ms, event,
-- conn, frame, assets, from_ms, to_ms, reason, recorder, session, format), one row per line, all NULL on a line
-- that is not JSON. ingest/ws/capture.ts.
CREATE OR REPLACE TEMP TABLE _cap_ev AS
SELECT line, recv_ms, event, conn, assets, from_ms, to_ms, reason FROM _cap_ln
WHERE frame IS NULL AND event IS NOT NULL AND recv_ms IS NOT NULL;

-- h: the frame's hash, so copies of one frame (another connection, another recorder) meet in a hash join.
CREATE OR REPLACE TEMP TABLE _cap_fr AS
SELECT line AS el, recv_ms, conn, frame, hash(frame) AS h FROM _cap_ln
WHERE frame IS NOT NULL AND recv_ms IS NOT NULL;

INSERT INTO _cap_subs
SELECT conn, unnest(assets) AS asset, line, recv_ms FROM _cap_ev
WHERE event IN ('assets', 'subscribe') AND conn IS NOT NULL AND assets IS NOT NULL;

-- Lost connections, for the stretches this file proves it was subscribed (ingest/ws/capture-outages.ts).
INSERT INTO _cap_disc
SELECT conn, line, recv_ms FROM _cap_ev WHERE event = 'disconnect' AND conn IS NOT NULL;
