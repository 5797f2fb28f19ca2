import { parentPort, workerData } from 'node:worker_threads';
import { buildPlan, type GenerateOptions } from './plan.js';
import { runDay } from './day.js';

/** Worker thread: rebuilds the (deterministic) plan from the options, then simulates the days it is sent. */
const plan = buildPlan(workerData as GenerateOptions);
parentPort!.on('message', (day: number) => {
  parentPort!.postMessage(runDay(plan, day));
});
