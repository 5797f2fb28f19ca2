-- A capture's frames as the tape's elements (_ws_el, the input of ws_json_messages.sql). The cast keeps the frame's
-- text byte for byte; a frame that is not JSON becomes an empty array (no message) and its text is put back as the
-- stored frame by capture_recv.sql. ok: the frame is JSON.
CREATE OR REPLACE TEMP TABLE _ws_el AS
SELECT el, coalesce(j, '[]'::JSON) AS j, j IS NOT NULL AS ok,
       j IS NOT NULL AND CASE left(frame, 1) WHEN '{' THEN true WHEN '[' THEN false ELSE left(ltrim(frame), 1) = '{' END AS obj
FROM (SELECT el, frame, TRY_CAST(frame AS JSON) AS j FROM _cap_fr);
