import fs from 'node:fs';

/**
 * Memory of a process from /proc. VmHWM is the peak resident set since the process started — or since the
 * last write of "5" to /proc/<pid>/clear_refs, which resets it (Linux ≥ 4.0). Resetting it before a
 * scenario and reading it after gives that scenario's peak without a sampling thread missing short spikes.
 * Where the reset is refused, a 20 ms sampler of VmRSS is the fallback.
 */

function statusField(pid: number | 'self', field: 'VmHWM' | 'VmRSS'): number {
  try {
    const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
    return m ? Number(m[1]) * 1024 : Number.NaN;
  } catch {
    return Number.NaN;
  }
}

export function rssBytes(pid: number | 'self'): number {
  return statusField(pid, 'VmRSS');
}

function resetPeak(pid: number | 'self'): boolean {
  try {
    fs.writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** Tracks one process's peak RSS over an interval: `const p = peakTracker(pid); …work…; p.stop()`. */
export function peakTracker(pid: number | 'self'): { stop(): number } {
  const reset = resetPeak(pid);
  let sampled = rssBytes(pid);
  const timer = setInterval(() => {
    const v = rssBytes(pid);
    if (v > sampled) sampled = v;
  }, 20);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      const last = rssBytes(pid);
      const hwm = reset ? statusField(pid, 'VmHWM') : Number.NaN;
      return Math.max(Number.isFinite(hwm) ? hwm : 0, sampled || 0, last || 0);
    },
  };
}
