-- After ws_json_messages.sql over a capture's frames: the recorder's receive time is every frame's time basis
-- (ws_stage.sql reads wrap_ms before any venue timestamp), and the stored frame is the captured text itself — also
-- for a frame that is not JSON, and for one that merely looks like a wrapper or a REST envelope.
UPDATE _ws_m SET wrap_ms = f.recv_ms FROM _cap_fr f WHERE _ws_m.el = f.el;

ALTER TABLE _ws_fr ALTER frame TYPE VARCHAR;

UPDATE _ws_fr SET wrap_ms = f.recv_ms, frame = f.frame FROM _cap_fr f WHERE _ws_fr.el = f.el;

-- Object frames are not listed in _ws_fr (unless they look like a wrapper); listed with their receive time, a frame
-- received before one above it is a recv_backwards by any amount (the basis is the capture's own clock, not a venue
-- timestamp). One row per frame: ws_stage.sql joins _ws_fr by el.
INSERT INTO _ws_fr
SELECT f.el, 'capture', f.recv_ms, NULL FROM _cap_fr f JOIN _ws_el e USING (el)
WHERE e.obj AND f.el NOT IN (SELECT el FROM _ws_fr);
