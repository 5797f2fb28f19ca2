/** The market channel's client messages: one parser for the simulated venue and pmlake's replay (src/replay/). */
export { INVALID_OPERATION, parseClientMessage, type ClientMessage } from '../../src/replay/venue-protocol.js';
