import { ProgressMeter, progressLine, type IngestProgress, type ProgressDisplay } from './progress.js';

/** What the terminal display needs of stderr (process.stderr on a TTY). */
export type TerminalStream = {
  write: NodeJS.WriteStream['write'];
  columns?: number | undefined;
};

/** Carriage return, then erase the whole line (ECMA-48 EL 2): the cursor stays at its start. */
const ERASE = '\r\x1b[2K';

/**
 * One line redrawn in place, as npm and cargo do. Everything else written to the stream meanwhile (pino lines, a
 * handler's messages) goes through `stream.write`, which the display wraps while it runs: the line is erased first
 * and redrawn below the text on the next tick, so no output is ever appended to a half line. The line is cut to the
 * terminal's width minus one column (a character in the last column makes some terminals wrap, and the next erase
 * would then clear the wrong line).
 */
export function terminalProgress(stream: TerminalStream, opts: { redrawMs?: number } = {}): ProgressDisplay {
  const meter = new ProgressMeter();
  const original = stream.write;
  const raw = (text: string): void => {
    original.call(stream, text);
  };
  let drawn = false;
  let started = false;
  let lastDraw = 0;
  const draw = (): void => {
    if (!started) return;
    // A terminal that reports no size (0 columns, as under script(1)) gets the usual 80.
    const width = (stream.columns !== undefined && stream.columns > 0 ? stream.columns : 80) - 1;
    raw(`${ERASE}${[...progressLine(meter.figures())].slice(0, width).join('')}`);
    drawn = true;
    lastDraw = performance.now();
  };
  const clear = (): void => {
    if (!drawn) return;
    raw(ERASE);
    drawn = false;
  };
  const wrapped = function (this: unknown, ...args: Parameters<NodeJS.WriteStream['write']>): boolean {
    clear();
    return (original as (...a: Parameters<NodeJS.WriteStream['write']>) => boolean).apply(stream, args);
  };
  stream.write = wrapped as NodeJS.WriteStream['write'];
  const redrawMs = opts.redrawMs ?? 200;
  const timer = setInterval(draw, redrawMs);
  timer.unref();
  return {
    onProgress(p: IngestProgress) {
      started = true;
      meter.update(p);
      // Inputs finishing in quick succession redraw at most every tick; the clock moves on the timer.
      if (!drawn || performance.now() - lastDraw >= redrawMs / 2) draw();
    },
    stop() {
      clearInterval(timer);
      // The final figures are drawn once (a short run might otherwise never show its last count), then erased.
      draw();
      clear();
      started = false;
      stream.write = original;
    },
  };
}
